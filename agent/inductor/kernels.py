"""One Inductor Triton kernel made self-contained: its source (the text inside `async_compile.triton(...)`) read with
`ast`, its `@triton_heuristics...` decorator dropped, `tl_math` spelled `tl.math`, and each `triton_helpers.X` it
uses replaced by a plain @triton.jit copy of X read from the installed torch's source (never imported: the file is
parsed, not run). Anything this module does not know is refused with a message naming it (agent.inductor.translate
turns that into one line)."""

from __future__ import annotations

import ast
import copy
import importlib.util
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

HELPER_PREFIX = "helper_"
# The decorators of the kernels Inductor writes for plain fusions; templates (max-autotune GEMMs), foreach, split
# scans and cooperative reductions need launch arguments or workspaces a plain launch does not give them.
KNOWN_HEURISTICS = {"pointwise", "reduction", "persistent_reduction"}
# The imports at the top of every Inductor kernel source, and what each name means in a kernel body.
KNOWN_IMPORTS: dict[tuple[str, str | None], str] = {
    ("triton", None): "triton",
    ("triton.language", None): "tl",
    ("torch._inductor.runtime", "triton_helpers"): "helpers",
    ("torch._inductor.runtime", "triton_heuristics"): "decorator",
    ("torch._inductor.runtime.triton_helpers", "libdevice"): "libdevice",
    ("torch._inductor.runtime.triton_helpers", "math"): "tl.math",
}
HINT_MODULE = "torch._inductor.runtime.hints"  # names used only inside the dropped decorator
# Names a Triton function body may use besides its own locals, the modules and the helpers.
SAFE_BUILTINS = {"float", "int", "bool", "range", "min", "max", "len", "abs", "print", "True", "False", "None"}
MODULE_NAMES = {"tl", "triton", "libdevice"}


class KernelError(Exception):
    """A kernel (or helper) construct the translation does not know: the message names it."""


@dataclass
class Translated:
    """A kernel's functions as source text (local helpers first, then the kernel), and what they need."""

    functions: list[str]
    helpers: set[str] = field(default_factory=set)  # the triton_helpers names used (without the prefix)
    libdevice: bool = False


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _bound(fn: ast.FunctionDef) -> set[str]:
    """Every name a function binds: its parameters and whatever it assigns (Triton bodies have no nested scopes)."""
    names = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


class _Rewrite(ast.NodeTransformer):
    """Rewrites one function's body: module aliases to the answer's spelling, helper calls to the inlined copies."""

    def __init__(self, aliases: dict[str, str], renames: dict[str, str], bound: set[str], where: str,
                 known_helpers: set[str], interpreter: bool) -> None:
        self.aliases, self.renames, self.bound, self.where = aliases, renames, bound, where
        self.known_helpers, self.interpreter = known_helpers, interpreter
        self.helpers: set[str] = set()
        self.libdevice = False

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id not in self.bound:
            meaning = self.aliases.get(node.value.id)
            if meaning == "helpers":
                if node.attr not in self.known_helpers:
                    raise KernelError(f"{self.where} uses triton_helpers.{node.attr}, which is not a plain "
                                      "@triton.jit helper in this torch")
                self.helpers.add(node.attr)
                return ast.copy_location(ast.Name(id=HELPER_PREFIX + node.attr, ctx=ast.Load()), node)
            if meaning == "tl.math":
                return ast.copy_location(ast.Attribute(value=ast.Attribute(value=ast.Name(id="tl", ctx=ast.Load()),
                                                       attr="math", ctx=ast.Load()), attr=node.attr, ctx=node.ctx), node)
            if meaning == "libdevice" and self.interpreter:
                if not hasattr(_tl_math(), node.attr):
                    raise KernelError(f"{self.where} uses libdevice.{node.attr}, which tl.math lacks (Triton's "
                                      "interpreter has no libdevice)")
                return ast.copy_location(ast.Attribute(value=ast.Attribute(value=ast.Name(id="tl", ctx=ast.Load()),
                                                       attr="math", ctx=ast.Load()), attr=node.attr, ctx=node.ctx), node)
            if meaning == "libdevice":
                self.libdevice = True
            if meaning == "tl" and (node.attr.startswith("_") or "descriptor" in node.attr):
                raise KernelError(f"{self.where} uses tl.{node.attr} (TMA or Triton internals), which a plain "
                                  "kernel module may not use")
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.bound:
            return node
        if node.id in self.renames:
            return ast.copy_location(ast.Name(id=self.renames[node.id], ctx=node.ctx), node)
        meaning = self.aliases.get(node.id)
        if meaning in MODULE_NAMES:
            if meaning == "libdevice":
                self.libdevice = True
            return ast.copy_location(ast.Name(id=meaning, ctx=node.ctx), node)
        if node.id in SAFE_BUILTINS:
            return node
        raise KernelError(f"{self.where} uses the name `{node.id}`, which the translation does not know")


def _tl_math():  # -> the module triton.language.math (triton is imported only when a kernel needs the check)
    import triton.language

    return triton.language.math


def _function(fn: ast.FunctionDef, new_name: str, aliases: dict[str, str], renames: dict[str, str],
              known_helpers: set[str], where: str, interpreter: bool) -> tuple[str, _Rewrite]:
    rw = _Rewrite(aliases, renames, _bound(fn), where, known_helpers, interpreter)
    fn.body = [rw.visit(stmt) for stmt in fn.body]
    fn.name, fn.returns = new_name, None
    fn.decorator_list = [ast.Attribute(value=ast.Name(id="triton", ctx=ast.Load()), attr="jit", ctx=ast.Load())]
    return ast.unparse(ast.fix_missing_locations(fn)), rw


def _imports(node: ast.Import | ast.ImportFrom, kernel: str) -> dict[str, str]:
    """What the names an import binds mean in the kernel's body."""
    out: dict[str, str] = {}
    for a in node.names:
        if isinstance(node, ast.ImportFrom) and node.module == HINT_MODULE:
            out[a.asname or a.name] = "decorator"
            continue
        if isinstance(node, ast.Import):
            key: tuple[str, str | None] = (a.name, None)
            bound = a.asname or a.name.split(".")[0]
        else:
            key, bound = (node.module or "", a.name), a.asname or a.name
        meaning = KNOWN_IMPORTS.get(key)
        if meaning is None:
            what = a.name if isinstance(node, ast.Import) else f"{node.module}.{a.name}"
            raise KernelError(f"kernel {kernel} imports {what}, which the translation does not know")
        out[bound] = meaning if a.asname or isinstance(node, ast.ImportFrom) else bound  # `import triton.language`: triton
    return out


def _is_jit(dec: ast.expr) -> bool:
    return _dotted(dec) == "triton.jit"


def translate_kernel(name: str, source: str, new_name: str, interpreter: bool = False) -> Translated:
    """The kernel `name` of one Inductor kernel source, as plain @triton.jit functions named `new_name` (its local
    @triton.jit helpers, such as a scan's combine function, renamed `new_name`_helper). `interpreter`: libdevice.X
    spelled tl.math.X, for Triton's interpreter (CPU mode), whose libdevice functions are stubs that return None."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise KernelError(f"kernel {name}: its source does not parse ({e.msg})") from e
    aliases: dict[str, str] = {}
    main: ast.FunctionDef | None = None
    local: list[ast.FunctionDef] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            aliases.update(_imports(stmt, name))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                _dotted(stmt.value.func) == "triton_helpers.set_driver_to_gpu":
            continue  # the answer runs where the harness puts it
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            main = stmt
        elif isinstance(stmt, ast.FunctionDef) and len(stmt.decorator_list) == 1 and _is_jit(stmt.decorator_list[0]):
            local.append(stmt)
        else:
            first = ast.unparse(stmt).splitlines()[0][:80]
            raise KernelError(f"kernel {name}: unknown top-level statement `{first}`")
    if main is None:
        raise KernelError(f"kernel {name}: no function of that name in its source")
    _check_decorators(main, name)
    renames = {f.name: f"{new_name}_{f.name.lstrip('_')}" for f in local}
    helpers = known_helpers()
    out = Translated(functions=[])
    for fn in [*local, main]:
        text, rw = _function(fn, renames.get(fn.name, new_name), aliases, renames, set(helpers), f"kernel {name}",
                             interpreter)
        out.functions.append(text)
        out.helpers |= rw.helpers
        out.libdevice |= rw.libdevice
    return out


def _check_decorators(fn: ast.FunctionDef, name: str) -> None:
    decs = [_dotted(d.func if isinstance(d, ast.Call) else d) or ast.unparse(d) for d in fn.decorator_list]
    if not decs or decs[-1] != "triton.jit":
        raise KernelError(f"kernel {name}: not a @triton.jit function (decorators: {', '.join(decs) or 'none'})")
    for d in decs[:-1]:
        kind = d.removeprefix("triton_heuristics.")
        if kind == d or kind not in KNOWN_HEURISTICS:
            raise KernelError(f"kernel {name} is a `{d}` kernel; only {', '.join(sorted(KNOWN_HEURISTICS))} "
                              "kernels can be translated")


# ---------------------------------------------------------------- torch's triton_helpers, read as text


@lru_cache(maxsize=1)
def _helper_module() -> dict[str, ast.FunctionDef]:
    """The installed triton_helpers' plain @triton.jit functions by name (its other names, such as set_driver_to_gpu,
    constexpr_next_power_of_2 or _log2, are not helpers a kernel module can carry: a kernel using them is refused)."""
    spec = importlib.util.find_spec("torch")  # the file is found, not imported (nor is torch._inductor)
    path = Path(spec.origin).parent / "_inductor" / "runtime" / "triton_helpers.py" if spec and spec.origin else None
    if path is None or not path.is_file():
        raise KernelError("torch._inductor.runtime.triton_helpers is not installed: its helpers cannot be inlined")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {s.name: s for s in tree.body
            if isinstance(s, ast.FunctionDef) and len(s.decorator_list) == 1 and _is_jit(s.decorator_list[0])}


def known_helpers() -> set[str]:
    return set(_helper_module())


# In triton_helpers, `math` is triton.language.math and `libdevice` triton's (see its triton_compat imports).
_HELPER_ALIASES = {"tl": "tl", "triton": "triton", "libdevice": "libdevice", "math": "tl.math"}


def helper_functions(names: set[str], interpreter: bool = False) -> tuple[list[str], bool]:
    """Plain @triton.jit copies of the named helpers and of every helper they call, callees first; and whether they
    use libdevice (`interpreter`: as in translate_kernel)."""
    jit = _helper_module()
    order: list[str] = []
    texts: dict[str, str] = {}
    libdevice = False

    def visit(name: str, path: tuple[str, ...]) -> None:
        nonlocal libdevice
        if name in texts or name in path:
            return
        fn = jit.get(name)
        if fn is None:
            raise KernelError(f"triton_helpers.{name} is not a @triton.jit helper in this torch")
        callees = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id in jit and n.id not in _bound(fn)}
        for c in sorted(callees):
            visit(c, (*path, name))
        # a copy: the cached tree stays as torch wrote it
        text, rw = _function(copy.deepcopy(fn), HELPER_PREFIX + name, _HELPER_ALIASES,
                             {c: HELPER_PREFIX + c for c in jit}, set(), f"triton_helpers.{name}", interpreter)
        texts[name] = text
        libdevice |= rw.libdevice
        order.append(name)

    for n in sorted(names):
        visit(n, ())
    return [texts[n] for n in order], libdevice
