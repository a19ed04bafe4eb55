"""What CPU mode cannot judge: an answer whose work depends on the device or on Triton's interpreter.

CPU mode runs the candidate under TRITON_INTERPRET=1 with CPU tensors. Code that branches on that (`x.is_cuda`,
`x.device.type == "cuda"`, `torch.cuda.is_available()`, `os.environ["TRITON_INTERPRET"]`, or a name, attribute or
function holding one of them) runs on a GPU a path CPU mode never ran: "Triton under the interpreter, torch.mean
otherwise" would be certified for code a GPU never runs, and "PyTorch off CUDA" refused for a kernel it never saw. Such
a branch makes the answer `needs_gpu` on the CPU when its two paths do different work: a kernel launched or a
function called on one side only, or a return, raise or own function taken on one side only. Paths that differ in
constants alone (block sizes, a precision string), or in device plumbing (torch.cuda's guards and queries, contextlib's
null context, triton's helpers), run the same work: CPU mode judges them. At import (module or class level), what
counts is what outlives the branch: a name it binds that code outside it reads, a kernel it launches.

A CUDA requirement met at run time (`assert x.is_cuda`, "Torch not compiled with CUDA enabled") is the same verdict:
`cuda_required` reads it in the worker's error. On a GPU none of this applies: the answer is judged as any other.
"""

from __future__ import annotations

import ast
import builtins
import re

from agent.harness.names import aliases as find_aliases
from agent.harness.names import dotted

_ROOTS = {"torch", "triton", "os", "contextlib"}
_DEVICE_ATTRS = {"is_cuda", "is_cpu"}
_DEVICE_WORDS = re.compile(r"(cuda|cpu|hip|xpu|mps)(:\d+)?")
_DEVICE_QUERIES = {"torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.is_initialized"}
# Calls that place or describe work rather than do it: device guards and queries, a null context, triton's host
# helpers (cdiv, next_power_of_2, set_allocator, the driver's queries), warnings and logging
_PLUMBING = ("torch.cuda.", "torch.backends.", "torch.version.", "torch.device", "contextlib.", "triton.cdiv",
             "triton.next_power_of_2", "triton.set_allocator", "triton.runtime.", "warnings.", "logging.", "math.",
             "os.")
_METADATA = {"size", "stride", "dim", "numel", "element_size", "is_contiguous", "get_device", "data_ptr", "nelement",
             "ndimension", "item_size", "get", "startswith", "lower", "format"}
_BUILTINS = set(dir(builtins))
_PASSES = 4


class _Signals:
    """The expressions that tell the device or the interpreter, with the names, self attributes and functions that
    hold one (each found where any of its bindings is one: the conservative reading)."""

    def __init__(self, tree: ast.Module, aliases: dict[str, str]) -> None:
        self.aliases = aliases
        self.names: set[str] = set()
        self.attrs: set[str] = set()
        self.funcs: set[str] = set()
        for _ in range(_PASSES):
            before = (len(self.names), len(self.attrs), len(self.funcs))
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None and \
                        self.reads(node.value):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Name):
                            self.names.add(t.id)
                        elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            self.attrs.add(t.attr)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                        isinstance(r, ast.Return) and r.value is not None and self.reads(r.value)
                        for r in ast.walk(node)):
                    self.funcs.add(node.name)
            if (len(self.names), len(self.attrs), len(self.funcs)) == before:
                break

    def reads(self, expr: ast.AST) -> str | None:
        """The first device or interpreter read in `expr`, as source text; None where it reads none."""
        for n in ast.walk(expr):
            if isinstance(n, ast.Attribute) and n.attr in _DEVICE_ATTRS | self.attrs or \
                    isinstance(n, ast.Attribute) and n.attr == "type" and _names_a_device(n.value):
                return ast.unparse(n)
            if isinstance(n, ast.Constant) and n.value == "TRITON_INTERPRET":
                return "TRITON_INTERPRET"
            if isinstance(n, ast.Compare) and any(isinstance(c, ast.Constant) and isinstance(c.value, str) and
                                                  _DEVICE_WORDS.fullmatch(c.value) for c in ast.walk(n)):
                return ast.unparse(n)
            if isinstance(n, ast.Call):
                path = dotted(n.func, self.aliases)
                own = n.func.id if isinstance(n.func, ast.Name) else n.func.attr \
                    if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and \
                    n.func.value.id in ("self", "cls") else None
                if path in _DEVICE_QUERIES or own in self.funcs:
                    return ast.unparse(n)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in self.names:
                return n.id
        return None


def _names_a_device(node: ast.AST) -> bool:
    """`x.device`, `device`, `dev` (the value whose `.type` is read)."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return "device" in name.lower() or name == "dev"


def _work(nodes: list[ast.AST], aliases: dict[str, str], own: set[str]) -> set[str]:
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


def _at_import(node: ast.AST) -> bool:
    parent = getattr(node, "_parent", None)
    while parent is not None:
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
        parent = getattr(parent, "_parent", None)
    return True


def _lasting(nodes: list[ast.AST], tree: ast.Module, aliases: dict[str, str], own: set[str]) -> set[str]:
    """What an import-time path leaves behind: names it binds that code outside it reads (ModelNew always), with what
    their values or bodies do; kernels it launches; names of the module's it mutates through a method."""
    inside = {id(n) for top in nodes for n in ast.walk(top)}
    read_outside = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                    and id(n) not in inside} | {"ModelNew"}
    out: set[str] = set()
    for top in nodes:
        for n in ast.walk(top):
            if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for name in (t.id for t in targets if isinstance(t, ast.Name) and t.id in read_outside):
                    out.add(f"binds {name} to {sorted(_work([n.value], aliases, own))}")
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in read_outside:
                out.add(f"defines {n.name} doing {sorted(_work(list(n.body), aliases, own))}")
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript):
                out.add(f"launch {ast.unparse(n.func.value)}")
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                    and n.func.value.id in read_outside and n.func.value.id not in own and \
                    n.func.value.id not in aliases and n.func.attr not in _METADATA:
                out.add(f"{n.func.value.id}.{n.func.attr}()")
    return out


def _paths(node: ast.If | ast.IfExp) -> tuple[list[ast.AST], list[ast.AST]]:
    """The two paths of a branch. An `if` without `else` whose body ends in return or raise: the statements after it
    in the same block are the other path (`if not x.is_cuda: return torch.mean(x)` then the kernel)."""
    if isinstance(node, ast.IfExp):
        return [node.body], [node.orelse]
    body: list[ast.AST] = list(node.body)
    orelse: list[ast.AST] = list(node.orelse)
    if not orelse and node.body and isinstance(node.body[-1], (ast.Return, ast.Raise)):
        parent = getattr(node, "_parent", None)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and node in block:
                orelse = list(block[block.index(node) + 1:])
                break
    return body, orelse


def cpu_cannot_judge(code: str) -> str | None:
    """Why CPU mode cannot judge `code` (one line naming the branch and what only one of its paths does), or None.
    `code` has passed the static policy."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return None
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._parent = parent  # type: ignore[attr-defined]
    aliases = find_aliases(tree, _ROOTS)
    signals = _Signals(tree, aliases)
    own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.If, ast.IfExp)):
            continue
        read = signals.reads(node.test)
        if read is None:
            continue
        a, b = _paths(node)
        if _at_import(node):
            wa, wb = _lasting(a, tree, aliases, own), _lasting(b, tree, aliases, own)
        else:
            wa, wb = _work(a, aliases, own), _work(b, aliases, own)
        if wa != wb:
            only = sorted(wa ^ wb)
            shown = ", ".join(f"`{_clip(w)}`" for w in only[:3]) + (f" (+{len(only) - 3})" if len(only) > 3 else "")
            return (f"line {node.lineno} branches on `{_clip(read)}` and its paths do different work ({shown} on one "
                    "side only): CPU mode runs one path, a GPU the other; judge it on a GPU (--device cuda)")
    return None


def _clip(text: str, n: int = 60) -> str:
    """The candidate's text as one printable line (its control characters escaped), at most n characters."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in " ".join(text.split()))
    return text if len(text) <= n else text[: n - 3] + "..."


# A CUDA requirement in the worker's error: the candidate's own assert or raise, or PyTorch's CPU build refusing CUDA
_CUDA_ERROR = re.compile(r"^(AssertionError|RuntimeError|ValueError|NotImplementedError|TypeError)\b.*"
                         r"(\bcuda\b|is_cuda|\bgpu\b|TRITON_INTERPRET)", re.I | re.S)


def cuda_required(message: str) -> bool:
    """The worker's error (`AssertionError:  (candidate line 31: `assert x.is_cuda`)`) says the code requires CUDA."""
    return bool(_CUDA_ERROR.match(message))
