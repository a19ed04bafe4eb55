"""String annotations are code: typing.get_type_hints, typing.ForwardRef and functools.singledispatch's register
evaluate them (`def f(a: "torch.cuda.Event(enable_timing=True)")` runs a clock), while the static policy reads only
the tree. So each string inside an annotation is parsed and put in the tree in its place, at its line, and checked as
the code it is. A string that does not parse is left alone: no evaluation of it can run anything."""

from __future__ import annotations

import ast


class _Strings(ast.NodeTransformer):
    def __init__(self) -> None:
        self.changed = False

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if not isinstance(node.value, str):
            return node
        try:
            expr = ast.parse(node.value.strip(), mode="eval").body
        except (SyntaxError, ValueError):
            return node
        for n in ast.walk(expr):  # report at the string's place in the answer
            if isinstance(n, (ast.expr, ast.keyword, ast.arg)):
                ast.copy_location(n, node)
        self.changed = True
        return self.visit(expr)  # a string inside the string is evaluated in turn


def annotations_as_code(tree: ast.AST) -> bool:
    """Replace every string in an annotation of `tree` by the expression it spells; True if any was replaced."""
    strings = _Strings()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            node.annotation = strings.visit(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            node.returns = strings.visit(node.returns)
        elif isinstance(node, ast.AnnAssign):
            node.annotation = strings.visit(node.annotation)
    return strings.changed


def annotation_texts(tree: ast.AST) -> frozenset[str]:
    """What typing may evaluate of this module's annotations, as the static check read it as code: each annotation as
    the interpreter keeps it under `from __future__ import annotations` (its unparsed source) and every string inside
    one, nested strings too (agent.harness.worker.trusted refuses the evaluation of any other string)."""
    out: set[str] = set()

    def add(node: ast.expr) -> None:
        out.add(ast.unparse(node).strip())
        for n in ast.walk(node):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                out.add(n.value.strip())
                try:
                    add(ast.parse(n.value.strip(), mode="eval").body)
                except (SyntaxError, ValueError, RecursionError):
                    pass

    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            add(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            add(node.returns)
        elif isinstance(node, ast.AnnAssign):
            add(node.annotation)
    return frozenset(out)
