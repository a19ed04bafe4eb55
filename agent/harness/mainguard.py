"""Main guards: an answer's `if __name__ == "__main__":` self-test or benchmark, which the harness never runs (it
imports the candidate under another name). The static policy empties those bodies before checking the rest."""

from __future__ import annotations

import ast


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def _binds_module_name(tree: ast.Module) -> bool:
    """Whether the code could make `__name__` anything but the module's name: any occurrence other than a read
    (an assignment, a walrus, an import alias, a def, a pattern capture, `global __name__`, an argument)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            if n.id == "__name__" and not isinstance(n.ctx, ast.Load):
                return True
        elif not isinstance(n, (ast.Attribute, ast.Constant)):
            for _, value in ast.iter_fields(n):
                if value == "__name__" or (isinstance(value, list) and "__name__" in value):
                    return True
    return False


def skip_main_guards(tree: ast.Module) -> bool:
    """Empty the bodies of top-level `if __name__ == "__main__":` blocks (an answer's self-test or benchmark, which
    may time with what a kernel module may not use): the harness imports the candidate under another name, so they
    never run, provided nothing in the code rebinds `__name__`. Their `else` branches run and stay checked."""
    guards = [n for n in tree.body if isinstance(n, ast.If) and _is_main_test(n.test)]
    if not guards or _binds_module_name(tree):
        return False
    for g in guards:
        g.body = [ast.copy_location(ast.Pass(), g)]
    return True
