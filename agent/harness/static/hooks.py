"""Code of the answer's that Triton runs inside a launch: the allocator set by `triton.set_allocator`, which the
launcher calls for a kernel's scratch memory (device-side tensor descriptors need it). The tracer does not record
the operators run inside a launch (the interpreter's own copies run there in CPU mode), so an allocator that
computed would compute unseen, its writes credited to the kernel. It may only allocate: a lambda or a function
whose one statement returns `torch.empty(...)` of plain arguments, passed to a direct call of set_allocator.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from agent.harness.static.names import dotted

_SET = "triton.set_allocator"
_ALLOCATE = {"torch.empty"}
_WHY = ("an allocator runs inside the launch, where operators are not recorded: it may only return "
        "torch.empty(...) of its arguments, and set_allocator only be called directly with it")


def allocator_hooks(tree: ast.Module, aliases: dict[str, str]) -> Iterator[tuple[ast.AST, str]]:
    """(node, message) for each use of set_allocator that is not a direct call with a pure allocator."""
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, []).append(node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and \
                any(isinstance(a, ast.Constant) and a.value == "set_allocator" for a in node.args[1:2]):
            yield node, f"`getattr(..., 'set_allocator')`: {_WHY}"
        if not isinstance(node, (ast.Attribute, ast.Name)) or dotted(node, aliases) != _SET:
            continue
        if isinstance(node, ast.Attribute) and isinstance(getattr(node, "_parent", None), ast.Attribute):
            continue  # a longer path (triton.set_allocator.x): the path check judges it
        call = getattr(node, "_parent", None)
        if not (isinstance(call, ast.Call) and call.func is node):
            yield node, f"`{_SET}` passed around: {_WHY}"
            continue
        fn = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "allocator"), None)
        if not _pure(fn, functions, aliases):
            yield call, f"`{_SET}(...)`: {_WHY}"


def _pure(fn: ast.expr | None, functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]],
          aliases: dict[str, str]) -> bool:
    if isinstance(fn, ast.Lambda):
        return _allocates(fn.body, aliases)
    if not isinstance(fn, ast.Name) or len(functions.get(fn.id, [])) != 1:
        return False  # a function defined twice (or not here) cannot be read for what the launch will call
    body = functions[fn.id][0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # its docstring
    return len(body) == 1 and isinstance(body[0], ast.Return) and _allocates(body[0].value, aliases) and \
        not functions[fn.id][0].decorator_list


def _allocates(expr: ast.expr | None, aliases: dict[str, str]) -> bool:
    """`torch.empty(...)` whose arguments call nothing (sizes, dtypes, devices: names, constants, arithmetic)."""
    if not (isinstance(expr, ast.Call) and dotted(expr.func, aliases) in _ALLOCATE):
        return False
    parts = [*expr.args, *(k.value for k in expr.keywords)]
    return not any(isinstance(n, (ast.Call, ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom,
                                  ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp))
                   for p in parts for n in ast.walk(p))
