"""Which pointer expressions in a Triton kernel name the same address: a structural hash of the expression, with
every local assigned exactly once (`p = out_ptr + offs`) replaced by the hash of its value.

Hashes are computed bottom-up with an explicit stack and memoised per name, so a chain of any length costs time
linear in the kernel's size (the old recursive substitution was exponential in a chain of assignments).
Parameters and names assigned more than once (loop counters, `p += step`) stay opaque: the same name may then be
a different address, and nothing is claimed.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable


def _bindings(fn: ast.FunctionDef) -> tuple[dict[str, ast.expr], set[str]]:
    """(name -> value for names bound exactly once by `name = value`, every name bound in fn)."""
    counts: Counter[str] = Counter()
    a = fn.args
    for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
        if arg is not None:
            counts[arg.arg] += 1
    plain: dict[str, ast.expr] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] += 1
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            plain[node.targets[0].id] = node.value
    single = {name: value for name, value in plain.items() if counts[name] == 1}
    return single, set(counts)


class PointerKeys:
    """Address keys for the pointer expressions of one kernel."""

    def __init__(self, fn: ast.FunctionDef, tick: Callable[[], None] = lambda: None) -> None:
        self.single, bound = _bindings(fn)
        a = fn.args
        params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x is not None}
        # names rebound somewhere (loop counters, `p += step`): each use may be another address
        self.varying = {n for n in bound if n not in self.single and n not in params} | {
            n for n in params if any(isinstance(x, ast.Name) and x.id == n and isinstance(x.ctx, ast.Store) for x in ast.walk(fn))}
        self.tick = tick
        self.memo: dict[str, int] = {}

    def key(self, root: ast.expr) -> int:
        results: dict[int, int] = {}
        visiting: set[str] = set()
        stack: list[tuple[ast.AST, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            self.tick()
            if isinstance(node, ast.Name) and node.id in self.single:
                name = node.id
                if name in self.memo:
                    results[id(node)] = self.memo[name]
                elif name in visiting and not done:
                    results[id(node)] = hash(("name", name))  # a cycle cannot happen for single bindings; be safe
                elif not done:
                    visiting.add(name)
                    stack.append((node, True))
                    stack.append((self.single[name], False))
                else:
                    visiting.discard(name)
                    self.memo[name] = results[id(self.single[name])]
                    results[id(node)] = self.memo[name]
                continue
            if isinstance(node, ast.Name) and node.id in self.varying:
                results[id(node)] = hash(("varying", id(node)))
                continue
            children = [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.expr_context)]
            if not done:
                stack.append((node, True))
                stack.extend((c, False) for c in children)
                continue
            own = tuple((f, repr(v)) for f, v in ast.iter_fields(node) if not isinstance(v, (ast.AST, list)))
            results[id(node)] = hash((type(node).__name__, own, tuple(results[id(c)] for c in children)))
        return results[id(root)]
