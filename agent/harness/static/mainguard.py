"""A candidate's code that never runs. Its self-test: the harness imports the candidate under the name `candidate`, so
a top-level `if __name__ == "__main__":` body is dead code, provided nothing in the module can rebind `__name__`; and so
are the helpers only it calls (a `benchmark()` timing with CUDA events). Its type checker's imports: a top-level
`if TYPE_CHECKING:` body, where the name is typing's constant (False at run time) and nothing rebinds it. The static
policy (agent.harness.static.policy) empties those bodies before it checks the rest."""

from __future__ import annotations

import ast

from agent.harness.static.names import binds


def is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def binds_module_name(tree: ast.Module) -> bool:
    """Whether the code could make `__name__` anything but the module's name: any occurrence other than a read
    (an assignment, a walrus, an import alias, a def, a pattern capture, `global __name__`, an argument)."""
    return binds(tree, "__name__", set())


_TYPING = ("typing", "typing_extensions")


def _typing_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(the names an import binds to typing's TYPE_CHECKING, the names an import binds to typing itself), each kept
    only where nothing else in the module binds it."""
    flag: dict[str, set[ast.AST]] = {}
    module: dict[str, set[ast.AST]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module in _TYPING:
            for a in n.names:
                if a.name == "TYPE_CHECKING":
                    flag.setdefault(a.asname or a.name, set()).add(a)
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.name in _TYPING:
                    module.setdefault(a.asname or a.name, set()).add(a)
    return ({name for name, imports in flag.items() if not binds(tree, name, imports)},
            {name for name, imports in module.items() if not binds(tree, name, imports)})


def skip_type_checking(tree: ast.Module) -> bool:
    """Empty the bodies of top-level `if TYPE_CHECKING:` blocks (`typing.TYPE_CHECKING` too): imports for
    annotations only (`import numpy as np`, Triton's JITFunction), which never run, typing's constant being False
    at run time (a candidate cannot set it: assigning a module's attribute is refused). Only where the name is
    typing's and nothing rebinds it; `else` branches run and stay checked. True where anything was emptied."""
    flags, modules = _typing_names(tree)

    def is_flag(test: ast.expr) -> bool:
        if isinstance(test, ast.Name):
            return test.id in flags
        return (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING" and isinstance(test.value, ast.Name)
                and test.value.id in modules)

    guards = [n for n in tree.body if isinstance(n, ast.If) and is_flag(n.test)]
    for g in guards:
        g.body = [ast.copy_location(ast.Pass(), g)]
    return bool(guards)


def skip_main_guards(tree: ast.Module) -> bool:
    """Empty the bodies of top-level `if __name__ == "__main__":` blocks (an answer's self-test or benchmark, which
    may time with what a kernel module may not use): the harness imports the candidate under another name, so they
    never run, provided nothing in the code rebinds `__name__`. Their `else` branches run and stay checked. Then the
    bodies of the functions nothing live calls (self_test_helpers). True where anything was emptied."""
    guards = [n for n in tree.body if isinstance(n, ast.If) and is_main_test(n.test)]
    if not guards or binds_module_name(tree):
        return False
    called = {n.id for g in guards for s in g.body for n in ast.walk(s) if isinstance(n, ast.Name)}
    for g in guards:
        g.body = [ast.copy_location(ast.Pass(), g)]
    for f in self_test_helpers(tree, called):
        f.body = [ast.copy_location(ast.Pass(), f.body[0])]
        f.decorator_list = [_Recorded().visit(d) for d in f.decorator_list]
    return True


# Triton's tutorials mark their benchmark `@triton.testing.perf_report(triton.testing.Benchmark(...))`: both only
# record their arguments (a Mark holding the function, run by `benchmark.run()` in the main guard), so on a helper
# only the self-test names they stand for the arguments alone, which stay checked (they run at import).
_RECORDERS = {"triton.testing.perf_report", "triton.testing.Benchmark"}


def _chain(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def _recording(decorator: ast.expr) -> bool:
    return isinstance(decorator, ast.Call) and _chain(decorator.func) == "triton.testing.perf_report"


class _Recorded(ast.NodeTransformer):
    """A recorder's call as the tuple of its arguments."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if _chain(node.func) not in _RECORDERS:
            return node
        return ast.copy_location(ast.Tuple(elts=[*node.args, *(k.value for k in node.keywords)], ctx=ast.Load()), node)


def self_test_helpers(tree: ast.Module, called: set[str]) -> list[ast.FunctionDef]:
    """The top-level functions only the (emptied) self-test calls: `def benchmark(model, x)` timing with CUDA
    events, named in the main guard (`called`) and by nothing else that runs, directly or through other such
    helpers. A function's body runs only where it is called, and a module-level function is reached only through its
    name (the frames, globals and getattr on the module that could reach it otherwise are refused). Undecorated only
    (a decorator is handed the function and may call it), but for Triton's perf_report, which only records it; its
    signature stays checked (defaults run at import). Never a dunder-named function (_protocol_name), and only after
    strings that are code (annotations: agent.harness.worker.annotations) are in the tree as the code they spell: a helper
    named in `-> "self_check()"` is called by typing.get_type_hints."""
    dead = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef) and all(map(_recording, f.decorator_list))
            and not _protocol_name(f.name)}
    while True:
        read = {n.id for n in _outside(tree, set(dead.values())) if isinstance(n, ast.Name)
                and not isinstance(n.ctx, ast.Store)}
        live = {name for name in dead if name in read}
        if not live:
            break
        for name in live:
            del dead[name]
    reached: set[str] = set()
    todo = [name for name in called if name in dead]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo += [n.id for s in dead[name].body for n in ast.walk(s) if isinstance(n, ast.Name) and n.id in dead]
    return [dead[name] for name in sorted(reached)]


def _protocol_name(name: str) -> bool:
    """A dunder name is one Python calls on its own: a module-level `__getattr__` answers every lookup the module
    lacks (the harness's own `module.ModelNew` once `del ModelNew` removed the class), `__dir__` every dir(). Such a
    function is reached without its name being read, so it is never a dead helper."""
    return name.startswith("__") and name.endswith("__")


def _outside(tree: ast.Module, bodies: set[ast.FunctionDef]) -> list[ast.AST]:
    """Every node of the module but those inside the bodies of `bodies` (their decorators and signatures kept)."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if node in bodies:
            assert isinstance(node, ast.FunctionDef)
            stack.extend([node.args, *node.decorator_list, *([node.returns] if node.returns else [])])
        else:
            stack.extend(ast.iter_child_nodes(node))
    return out
