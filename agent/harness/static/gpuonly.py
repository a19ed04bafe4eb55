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
import re

from agent.harness.static.gpupaths import lasting, loads, plumbing, shape, work
from agent.harness.static.names import aliases as find_aliases
from agent.harness.static.names import dotted

_ROOTS = {"torch", "triton", "os", "contextlib"}
_DEVICE_ATTRS = {"is_cuda", "is_cpu"}
_SETTING = re.compile(r"TRITON_\w+")  # a Triton setting read from the environment (TRITON_INTERPRET above all)
# Paths whose value differs between the CPU mode's interpreter and a GPU: CUDA's and the driver's queries, the build
_DEVICE_PATHS = ("torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.is_initialized",
                 "torch.cuda.current_device", "torch.backends.cudnn.is_available", "torch.version.",
                 "triton.runtime.driver.")
_DEVICE_WORDS = re.compile(r"(cuda|cpu|hip|xpu|mps)(:\d+)?")
_PASSES = 4


class _Signals:
    """The expressions that tell the device or the interpreter, with the names, self attributes and functions that
    hold one (each found where any of its bindings is one: the conservative reading)."""

    def __init__(self, tree: ast.Module, aliases: dict[str, str]) -> None:
        self.aliases = aliases
        # (scope, name): a name is a signal in the function that binds it (None: the module), so that a kernel's
        # local `p = tl.load(...)` says nothing of the wrapper's `p` (the offline window family was needs_gpu)
        self.names: set[tuple[int | None, str]] = set()
        self.scope = _scopes(tree)
        self.attrs: set[str] = set()
        self.funcs: set[str] = set()
        self.launchers = _launchers(tree)
        defs = {d.name: d for d in ast.walk(tree) if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
        # names bound to a literal dict, list or tuple (a lookup table of paths)
        self.tables: dict[str, ast.AST] = {t.id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                                           and isinstance(n.value, (ast.Dict, ast.List, ast.Tuple))
                                           for t in n.targets if isinstance(t, ast.Name)}
        for _ in range(_PASSES):
            before = (len(self.names), len(self.attrs), len(self.funcs))
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None and \
                        self.reads(node.value):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Subscript):  # MODE["gpu"] = ...: the table holds it
                            t = t.value
                        if isinstance(t, ast.Name):
                            self.names.add((self.scope.get(id(t)), t.id))
                        elif isinstance(t, ast.Attribute):  # self.gpu = ..., cfg.gpu = ...
                            self.attrs.add(t.attr)
                elif isinstance(node, ast.Call):
                    self._arguments(node, defs)
                elif isinstance(node, ast.If) and self.reads(node.test):
                    self._assigned_under(node)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                        isinstance(r, ast.Return) and r.value is not None and self.reads(r.value)
                        for r in ast.walk(node)):
                    self.funcs.add(node.name)
            if (len(self.names), len(self.attrs), len(self.funcs)) == before:
                break

    def _arguments(self, call: ast.Call, defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]) -> None:
        """A signal passed to an own function or kernel (`k[grid](..., ON_GPU=x.is_cuda)`) is a signal inside it:
        its parameter joins the names."""
        f = call.func.value if isinstance(call.func, ast.Subscript) else call.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        d = defs.get(name or "")
        if d is None:
            return
        params = [a.arg for a in (*d.args.posonlyargs, *d.args.args)]
        if params and params[0] in ("self", "cls") and isinstance(f, ast.Attribute):
            params = params[1:]
        for i, a in enumerate(call.args):
            if i < len(params) and self.reads(a):
                self.names.add((id(d), params[i]))
        for kw in call.keywords:
            if kw.arg is not None and self.reads(kw.value):
                self.names.add((id(d), kw.arg))

    def _assigned_under(self, node: ast.If) -> None:
        """A constant a device branch assigns depends on the device (`if x.is_cuda: MODE = 1 else: MODE = 0`), as
        what a value read from one holds does (`BLOCK = 64 if x.is_cuda else 1024`: judged where it is chosen, but a
        later branch on BLOCK is a branch on the device). A value computed there needs no mark: paths that compute
        differently are the branch's own verdict, and the same computation on both gives the same value."""
        for stmt in (*node.body, *node.orelse):
            for n in ast.walk(stmt):
                if not isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or n.value is None or \
                        not plumbing(n.value, self.aliases):
                    continue
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    for leaf in ast.walk(t):
                        if isinstance(leaf, ast.Name) and isinstance(leaf.ctx, ast.Store):
                            self.names.add((self.scope.get(id(leaf)), leaf.id))
                        elif isinstance(leaf, ast.Attribute) and isinstance(leaf.ctx, ast.Store):
                            self.attrs.add(leaf.attr)

    def _bound_signal(self, name: ast.Name) -> bool:
        """Whether the name read here is a signal in its function or one around it (a closure reads its outer's)."""
        scope = self.scope.get(id(name))
        while True:
            if (scope, name.id) in self.names:
                return True
            if scope is None:
                return False
            scope = self.scope.get(scope)

    def reads(self, expr: ast.AST) -> str | None:
        """The first device or interpreter read in `expr`, as source text; None where it reads none."""
        for n in ast.walk(expr):
            if isinstance(n, ast.Attribute) and n.attr in _DEVICE_ATTRS | self.attrs | {m for _, m in self.names} or \
                    isinstance(n, ast.Attribute) and n.attr in ("type", "index") and _names_a_device(n.value):
                return ast.unparse(n)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and \
                    (_SETTING.fullmatch(n.value) or n.value in _DEVICE_ATTRS):  # getattr(x, "is_cuda")
                return n.value
            path = dotted(n, self.aliases) if isinstance(n, ast.Attribute) else None
            if path is not None and path.startswith(_DEVICE_PATHS):
                return path
            if isinstance(n, ast.Compare) and any(isinstance(c, ast.Constant) and isinstance(c.value, str) and
                                                  _DEVICE_WORDS.fullmatch(c.value) for c in ast.walk(n)):
                return ast.unparse(n)
            if isinstance(n, ast.Call):
                path = dotted(n.func, self.aliases)
                own = n.func.id if isinstance(n.func, ast.Name) else n.func.attr \
                    if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and \
                    n.func.value.id in ("self", "cls") else None
                if own in self.funcs or isinstance(n.func, ast.Attribute) and n.func.attr == "get_device":
                    return ast.unparse(n)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and self._bound_signal(n):
                return n.id
        return None


def _scopes(tree: ast.Module) -> dict[int, int | None]:
    """id(node) -> id of the function (or lambda) whose body holds it; None at the module's level. A function's
    parameters are its own; its name and decorators belong to the scope around it."""
    out: dict[int, int | None] = {}

    def visit(node: ast.AST, scope: int | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                out[id(child)] = scope
                for d in getattr(child, "decorator_list", []):
                    visit(d, scope)
                    out[id(d)] = scope
                inner = [child.args, *(child.body if isinstance(child.body, list) else [child.body])]
                for part in inner:
                    out[id(part)] = id(child)
                    visit(part, id(child))
            else:
                out[id(child)] = scope
                visit(child, scope)

    visit(tree, None)
    return out


def _launchers(tree: ast.Module) -> set[str]:
    """The module's functions and classes that launch a kernel, themselves or through others of them."""
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    calls = {d.name: {c.func.id if isinstance(c.func, ast.Name) else c.func.attr if isinstance(c.func, ast.Attribute)
                      else "[launch]" for c in ast.walk(d) if isinstance(c, ast.Call)
                      and isinstance(c.func, (ast.Name, ast.Attribute, ast.Subscript))} for d in defs}
    found = {name for name, called in calls.items() if "[launch]" in called}
    for _ in range(_PASSES):
        more = {name for name, called in calls.items() if called & found} - found
        if not more:
            break
        found |= more
    return found


def _names_a_device(node: ast.AST) -> bool:
    """`x.device`, `device`, `dev` (the value whose `.type` is read)."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return "device" in name.lower() or name == "dev"


def _at_import(node: ast.AST) -> bool:
    parent = getattr(node, "_parent", None)
    while parent is not None:
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
        parent = getattr(parent, "_parent", None)
    return True


def _after(node: ast.AST) -> list[ast.AST]:
    """The statements after `node` in its block."""
    parent = getattr(node, "_parent", None)
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and node in block:
            return list(block[block.index(node) + 1:])
    return []


def _branches(node: ast.AST, signals: _Signals, aliases: dict[str, str],
              own: set[str]) -> tuple[str, list[list[ast.AST]]] | None:
    """(what it reads, its paths) where `node` chooses its path by the device or the interpreter: an `if` (without
    `else`, a body that ends in return or raise has the statements after it as its other path), a conditional
    expression, `and`/`or`, `while`, a `match`, a lookup indexed by one (`IMPLS[x.device.type]`); and a `try` whose
    body reaches CUDA or launches a kernel (a GPU may fail where the interpreter did not, and take a handler)."""
    read: str | None = None
    if isinstance(node, (ast.If, ast.While)):
        read = signals.reads(node.test)
        other: list[ast.AST] = list(node.orelse)
        if isinstance(node, ast.If) and not other and node.body and isinstance(node.body[-1], (ast.Return, ast.Raise)):
            other = _after(node)
        return (read, [list(node.body), other]) if read else None
    if isinstance(node, ast.IfExp):
        read = signals.reads(node.test)
        return (read, [[node.body], [node.orelse]]) if read else None
    if isinstance(node, ast.BoolOp):
        at = next((i for i, v in enumerate(node.values[:-1]) if signals.reads(v)), None)
        return (signals.reads(node.values[at]) or "", [list(node.values[at + 1:]), []]) if at is not None else None
    if isinstance(node, ast.Match):
        read = signals.reads(node.subject)
        cases: list[list[ast.AST]] = [list(c.body) for c in node.cases]
        return (read, [*cases, []]) if read else None
    lookup = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
        bool(node.args)  # IMPLS.get(x.device.type)
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) or lookup:
        container = node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            else node.value if isinstance(node, ast.Subscript) else None
        key = node.args[0] if isinstance(node, ast.Call) else node.slice if isinstance(node, ast.Subscript) else None
        if container is None or key is None:
            return None
        read = signals.reads(key)
        table = signals.tables.get(container.id) if isinstance(container, ast.Name) else container
        if read and isinstance(table, (ast.Dict, ast.List, ast.Tuple)):
            values = table.values if isinstance(table, ast.Dict) else table.elts
            return read, [[v] for v in values]
        return None
    if isinstance(node, ast.Try) and node.handlers and not _at_import(node):
        read = next((r for n in node.body if (r := signals.reads(n))), None)
        read = read or next((p for n in node.body for c in ast.walk(n) if isinstance(c, ast.Call)
                             and (p := dotted(c.func, aliases)) and p.startswith("torch.cuda.")), None)
        read = read or next((w for w in sorted(work(list(node.body), aliases, own))
                             if w.startswith("launch ") or w in signals.launchers), None)  # a kernel, or own code that does
        # a handler that raises is a failure either way (the GPU run reports it), not another path
        handlers: list[list[ast.AST]] = [list(h.body) for h in node.handlers
                                         if not (h.body and isinstance(h.body[-1], ast.Raise))]
        return (read, [list(node.body), *handlers]) if read and handlers else None
    return None


def cpu_cannot_judge(code: str) -> str | None:
    """Why CPU mode cannot judge `code` (one line naming the branch and what only one of its paths does), or None.
    `code` has passed the static policy (its size and analysis time bounded there)."""
    try:
        return _first_branch(ast.parse(code))
    except (SyntaxError, ValueError):
        return None
    except RecursionError:  # nesting the policy's own walk survived but this one's unparse did not: tell, never crash
        return "the code nests too deep to tell whether its work depends on the device: judge it on a GPU"


def _first_branch(tree: ast.Module) -> str | None:
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._parent = parent  # type: ignore[attr-defined]
    aliases = find_aliases(tree, _ROOTS)
    signals = _Signals(tree, aliases)
    own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    everywhere = loads([tree])
    for node in sorted(ast.walk(tree), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
        found = _branches(node, signals, aliases, own)
        if found is None:
            continue
        read, paths = found
        at_import = _at_import(node)
        # `a and b`: what the later operands call (a condition's own operands compute nothing worth comparing)
        shapes = [sorted(lasting(p, everywhere, aliases, own)) if at_import else sorted(work(p, aliases, own))
                  if isinstance(node, ast.BoolOp) else shape(p, aliases) for p in paths]
        if any(sh != shapes[0] for sh in shapes[1:]):
            works = [lasting(p, everywhere, aliases, own) if at_import else work(p, aliases, own) for p in paths]
            only = sorted({w.split(":")[0] for w in set().union(*works) - works[0].intersection(*works[1:])})
            shown = ", ".join(f"`{_clip(w)}`" for w in only[:3]) + (f" (+{len(only) - 3})" if len(only) > 3 else "")
            what = f"do different work ({shown} on one side only)" if only else "compute differently"
            how = f"runs `{_clip(read)}` in a try whose handler is another path, and they" if isinstance(node, ast.Try) \
                else f"branches on `{_clip(read)}` and its paths"
            return (f"line {getattr(node, 'lineno', 0)} {how} {what}: CPU mode runs one path, a GPU may run the other; "
                    "judge it on a GPU (--device cuda)")
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
