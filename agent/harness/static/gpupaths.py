"""What one path of a device or interpreter branch does (agent.harness.static.gpuonly compares a branch's paths): its work
by name (kernels launched, functions called, own code taken, return and raise), for the message; its shape (the
path's syntax with device plumbing left out and bare constants masked), for the comparison; and at import, what
outlives it.

Masked as equal: a constant standing alone (`BLOCK=256` and `BLOCK=64`, `return 4` and the SM count queried from
torch.cuda: a block size or a device's figure); plumbing (torch.cuda's guards and queries, contextlib's null context,
triton's host helpers, logging, asserts). Kept: constants inside arithmetic and comparisons (`x * 2` and `x * 3` run
different math), every call, operator and name. A constant chosen by the device and used later in math is judged at
the CPU's value: the residue of this rule, a GPU's run judges the other.
"""

from __future__ import annotations

import ast
import builtins
from collections import Counter

from agent.harness.static.names import dotted

# Calls that place or describe work rather than do it: device guards and queries, a null context, triton's host
# helpers (cdiv, next_power_of_2, set_allocator, the driver's queries), warnings and logging
_PLUMBING = ("torch.cuda.", "torch.backends.", "torch.version.", "torch.device", "contextlib.", "triton.cdiv",
             "triton.next_power_of_2", "triton.set_allocator", "triton.runtime.", "warnings.", "logging.", "math.",
             "os.")
_METADATA = {"size", "stride", "dim", "numel", "element_size", "is_contiguous", "get_device", "data_ptr", "nelement",
             "ndimension", "item_size", "get", "startswith", "lower", "format"}
_BUILTINS = set(dir(builtins))


def work(nodes: list[ast.AST], aliases: dict[str, str], own: set[str]) -> set[str]:
    """What a path does, by name: kernels launched, functions and methods called, own functions taken, return and
    raise. Constants leave no trace, nor does plumbing (with its arguments: `triton.set_allocator(alloc_fn)`)."""
    out: set[str] = set()
    stack = list(nodes)
    while stack:
        n = stack.pop()
        children: list[ast.AST] = list(ast.iter_child_nodes(n))
        if isinstance(n, ast.Return):
            out.add("return")
        elif isinstance(n, ast.Raise):
            out.add("raise")
        elif isinstance(n, ast.Call):
            f = n.func
            path = dotted(f, aliases)
            if isinstance(f, ast.Subscript):
                out.add(f"launch {ast.unparse(f.value)}")
                children = [f.slice, *n.args, *n.keywords]
            elif path is not None:
                if path.startswith(_PLUMBING):
                    continue
                out.add(path)
            elif isinstance(f, ast.Name):
                if f.id not in _BUILTINS:
                    out.add(f.id)
                children = [*n.args, *n.keywords]
            elif isinstance(f, ast.Attribute) and f.attr not in _METADATA:
                out.add(f".{f.attr}()")
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in own:
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and n.attr in own and \
                isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
            out.add(f"self.{n.attr}")
        stack.extend(children)
    return out


def loads(nodes: list[ast.AST]) -> Counter[str]:
    """How often each name is read in `nodes`."""
    return Counter(n.id for top in nodes for n in ast.walk(top) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def lasting(nodes: list[ast.AST], everywhere: Counter[str], aliases: dict[str, str], own: set[str]) -> set[str]:
    """What an import-time path leaves behind: names it binds that code outside it reads (`everywhere`: the module's
    reads, counted; ModelNew always), with what their values or bodies do; kernels it launches; names of the
    module's it mutates through a method."""
    inside = loads(nodes)
    read_outside = {name for name, count in everywhere.items() if count > inside[name]} | {"ModelNew"}
    out: set[str] = set()
    for top in nodes:
        for n in ast.walk(top):
            if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for name in (t.id for t in targets if isinstance(t, ast.Name) and t.id in read_outside):
                    out.add(f"binds {name}: {shape([n.value], aliases)}")
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in read_outside:
                out.add(f"defines {n.name}: {shape(list(n.body), aliases)}")
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript):
                out.add(f"launch {ast.unparse(n.func.value)}")
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                    and n.func.value.id in read_outside and n.func.value.id not in own and \
                    n.func.value.id not in aliases and n.func.attr not in _METADATA:
                out.add(f"{n.func.value.id}.{n.func.attr}()")
    return out


_ARITHMETIC = (ast.BinOp, ast.UnaryOp, ast.Compare, ast.AugAssign, ast.BoolOp)


def plumbing(node: ast.AST, aliases: dict[str, str]) -> bool:
    """`node` places or describes work without doing it: a plumbing call, a constant, or an attribute, item or tuple of
    them (`torch.cuda.get_device_properties(d).multi_processor_count`, `contextlib.nullcontext()`)."""
    if isinstance(node, ast.Call):
        path = dotted(node.func, aliases)
        return path is not None and path.startswith(_PLUMBING)
    if isinstance(node, ast.Attribute) and (node.attr == "device" or
                                            isinstance(node.value, ast.Attribute) and node.value.attr == "device"):
        return True  # a tensor's device and what describes it (`x.device.index`)
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        return plumbing(node.value, aliases)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(plumbing(e, aliases) for e in node.elts)
    if isinstance(node, ast.BinOp):  # a device's figure scaled: `props.multi_processor_count * 4`
        return plumbing(node.left, aliases) and plumbing(node.right, aliases)
    if isinstance(node, ast.UnaryOp):
        return plumbing(node.operand, aliases)
    return isinstance(node, ast.Constant)


def shape(nodes: list[ast.AST], aliases: dict[str, str]) -> str:
    """The paths' syntax, compared for equality: plumbing statements dropped, plumbing `with` blocks inlined, bare
    constants and plumbing expressions masked as `_`. Iterative: a deep expression costs no recursion."""
    out: list[str] = []
    stack: list[tuple[ast.AST | str, bool]] = [(n, False) for n in reversed(nodes)]
    while stack:
        node, arithmetic = stack.pop()
        if isinstance(node, str):
            out.append(node)
            continue
        if isinstance(node, (ast.Assert, ast.Pass)) or isinstance(node, ast.Expr) and plumbing(node.value, aliases) \
                or isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and \
                isinstance(node.value, ast.Call) and plumbing(node.value, aliases):
            continue
        if isinstance(node, ast.With) and all(plumbing(i.context_expr, aliases) for i in node.items):
            stack.extend((s, False) for s in reversed(node.body))
            continue
        if isinstance(node, ast.expr) and plumbing(node, aliases) and not (arithmetic and isinstance(node, ast.Constant)):
            out.append("_")
            continue
        if isinstance(node, ast.Constant):
            out.append(repr(node.value))
            continue
        items: list[tuple[ast.AST | str, bool]] = [(f"{type(node).__name__}(", False)]
        for name, value in ast.iter_fields(node):
            if name in ("ctx", "type_comment"):
                continue
            # a constant in math, or passed by position (`k[grid](x, out, 2.0)`: an operand, not a tuning knob)
            inner = arithmetic or isinstance(node, _ARITHMETIC) or isinstance(node, ast.Call) and name == "args"
            if isinstance(value, ast.AST):
                items.append((value, inner))
            elif isinstance(value, list):
                items.append(("[", False))
                items.extend((v, inner) if isinstance(v, ast.AST) else (repr(v), False) for v in value)
                items.append(("]", False))
            else:
                items.append((f"{name}={value!r}", False))
        items.append((")", False))
        stack.extend(reversed(items))
    return " ".join(out)
