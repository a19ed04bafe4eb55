"""What an answer's Triton kernels must be, read from its syntax tree: which functions are kernels (`@triton.jit`,
or jitted by a call), that there is one and forward can reach it, and (memory-fusion) that no kernel loads back a
value it stored at the same address. Called by agent.harness.static.policy.check, whose checker collects the violations."""

from __future__ import annotations

import ast
from typing import Protocol

from agent.harness.static.names import aliases as find_aliases
from agent.harness.static.names import dotted

_JIT = "triton.jit"
_TL = "triton.language"
_ROOTS = {"torch", "triton"}


class Reporter(Protocol):
    """The policy's checker, as these checks use it."""

    tree: ast.Module
    aliases: dict[str, str]

    def add(self, node: ast.AST, rule: str, message: str) -> None: ...

    def tick(self) -> None: ...


def _decorator_paths(fn: ast.FunctionDef, aliases: dict[str, str]) -> list[str]:
    return [dotted(d.func if isinstance(d, ast.Call) else d, aliases) or "" for d in fn.decorator_list]


def kernels(tree: ast.AST, aliases: dict[str, str]) -> list[ast.FunctionDef]:
    """The @triton.jit functions, and those jitted by a call (`gap_kernel = triton.jit(_gap_body)`)."""
    wrapped = {n.args[0].id for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args and
               isinstance(n.args[0], ast.Name) and dotted(n.func, aliases) == _JIT}
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and
            (_JIT in _decorator_paths(n, aliases) or n.name in wrapped)]


def kernel_names(code: str) -> list[str]:
    """Names of the @triton.jit functions (autotuned or not, at any depth), in source order: ncu's kernel filter."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    return [k.name for k in sorted(kernels(tree, find_aliases(tree, _ROOTS)), key=lambda k: (k.lineno, k.col_offset))]


def kernels_present(c: Reporter, found: list[ast.FunctionDef]) -> None:
    if not found:
        c.add(c.tree.body[0] if c.tree.body else c.tree, "no-kernel",
              "no @triton.jit kernel: a pure-PyTorch answer is not accepted, write at least one Triton kernel")
        return
    names = {k.name for k in found}
    # A kernel kept on a class (a staticmethod, `self._kernel[grid]`, `Ops.kernel[grid]`) is read as an attribute.
    # Either reading is only a hint: whether forward launches kernels is checked at run time (rules.every_call).
    used = {n.id for n in ast.walk(c.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names}
    used |= {n.attr for n in ast.walk(c.tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
             and n.attr in names}
    if not used:
        c.add(found[0], "no-kernel", f"kernel{'s' if len(names) > 1 else ''} {', '.join(sorted(names))} never "
              "launched: ModelNew must run its Triton kernels")


def store_then_load(c: Reporter, found: list[ast.FunctionDef]) -> None:
    """memory-fusion: a value stored and loaded back at the same address in one kernel is an intermediate round trip
    through memory. Same address = the same pointer expression once single-assigned locals are substituted
    (hashed bottom-up, so chains of any length cost linear time). The run-time check (rules.py) sees the rest."""
    from agent.harness.static.pointers import PointerKeys

    for k in found:
        keys = PointerKeys(k, c.tick)
        stores: list[tuple[ast.Call, int]] = []
        for node in _in_evaluation_order(k):
            if isinstance(node, ast.Call):
                fn = dotted(node.func, c.aliases)
                if fn in (f"{_TL}.store", f"{_TL}.load", f"{_TL}.core.store", f"{_TL}.core.load"):
                    ptr = node.args[0] if node.args else next((kw.value for kw in node.keywords if kw.arg == "pointer"), None)
                    key = keys.key(ptr) if ptr is not None else None
                    if key is None:
                        continue
                    if fn.endswith("store"):
                        stores.append((node, key))
                    else:
                        hit = next((s for s, sk in stores if sk == key), None)
                        if hit is not None:
                            c.add(node, "stage-store-then-load", f"kernel `{k.name}` loads back the value it stored at "
                                  f"line {hit.lineno} (same address): an intermediate round trip through memory — keep "
                                  "it in registers")


def _in_evaluation_order(fn: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of a function's body in the order Python evaluates them, straight through (each loop body once): a
    call after its arguments, so `tl.store(p, tl.load(p) * s)` loads before it stores, as its two-statement spelling
    does (was: source position, which read that line as store-then-load). An assignment's value comes before its
    targets. Iterative: a deep expression costs no recursion."""
    out: list[ast.AST] = []
    stack: list[tuple[ast.AST, bool]] = [(stmt, False) for stmt in reversed(fn.body)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            out.append(node)
            continue
        stack.append((node, True))
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            children = [node.value] + [ch for ch in children if ch is not node.value]
        stack.extend((ch, False) for ch in reversed(children))
    return out
