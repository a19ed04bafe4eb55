"""Static policy: AST rules checked before any candidate code runs (lists in policy.toml, stage rules from
the stage). Pure: code in, violations out.

Names are resolved through import aliases and simple assignments (`import triton.language as tl`,
`T = torch.Tensor`), so `tl.load` reads `triton.language.load` and `T.add = f` is a monkeypatch of torch.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from agent.schema import StageRules

_ROOTS = ("torch", "triton")
_JIT = {"triton.jit"}
_KERNEL_WRAPPERS = {"triton.autotune", "triton.heuristics"}
_TL = "triton.language"


class Violation(BaseModel):
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message} [{self.rule}]"


class _Policy(BaseModel):
    allowed_modules: set[str]
    forbidden: dict[str, str]
    forbidden_builtins: dict[str, str]
    forbidden_attributes: dict[str, str]
    dunder_attributes: set[str]
    dunder_names: set[str]
    absent_default: list[str]


@lru_cache(maxsize=1)
def _policy() -> _Policy:
    with open(Path(__file__).with_name("policy.toml"), "rb") as f:
        data = tomllib.load(f)
    return _Policy(
        allowed_modules=set(data["allowed_modules"]),
        forbidden=data["forbidden"],
        forbidden_builtins=data["forbidden_builtins"],
        forbidden_attributes=data["forbidden_attributes"],
        dunder_attributes=set(data["dunders"]["attributes"]),
        dunder_names=set(data["dunders"]["names"]),
        absent_default=data["absent"]["default"],
    )


def default_absent() -> list[str]:
    """The seed prompt's absent Triton functions (used when the stage module cannot say)."""
    return list(_policy().absent_default)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


# ---------------------------------------------------------------- name resolution


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted module path, from imports and from `X = torch.something` assignments."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    # assignments of torch/triton objects to plain names, to a fixed point (T = torch.Tensor; U = T)
    for _ in range(3):
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                dotted = _dotted(node.value, aliases)
                if dotted and dotted.split(".")[0] in _ROOTS:
                    aliases.setdefault(node.targets[0].id, dotted)
    return aliases


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`tl.load` -> 'triton.language.load' (through aliases); None for anything not a plain name chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    head = aliases.get(node.id)
    if head is None:
        return None
    return ".".join([head, *reversed(parts)])


def _forbidden_rule(dotted: str) -> tuple[str, str] | None:
    """(rule, matched prefix) if dotted is, or lies under, a forbidden name."""
    for prefix, rule in _policy().forbidden.items():
        if dotted == prefix or dotted.startswith(prefix + "."):
            return rule, prefix
    return None


# ---------------------------------------------------------------- kernels


def _decorator_names(fn: ast.FunctionDef, aliases: dict[str, str]) -> list[str]:
    names = []
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        names.append(_dotted(target, aliases) or "")
    return names


def _kernels(tree: ast.AST, aliases: dict[str, str]) -> list[ast.FunctionDef]:
    return [
        n for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and any(d in _JIT for d in _decorator_names(n, aliases))
    ]


def kernel_names(code: str) -> list[str]:
    """Names of the @triton.jit functions (autotuned or not), in source order: ncu's kernel filter."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    return [k.name for k in _kernels(tree, _aliases(tree))]


# ---------------------------------------------------------------- the checks


@dataclass
class _Checker:
    aliases: dict[str, str]
    absent: set[str]
    violations: list[Violation] = field(default_factory=list)

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.violations.append(Violation(line=getattr(node, "lineno", 0), rule=rule, message=message))

    def imports(self, tree: ast.AST) -> None:
        pol = _policy()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    self.add(node, "import", "relative imports are not allowed")
                    continue
                if any(a.name == "*" for a in node.names):
                    self.add(node, "import", f"`from {node.module} import *` is not allowed: import names explicitly")
                modules = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in pol.allowed_modules:
                    self.add(node, "import", f"import of `{top}` is not allowed (allowed: {', '.join(sorted(pol.allowed_modules - {'__future__'}))})")
                    break
                hit = _forbidden_rule(module)
                if hit:
                    self.add(node, hit[0], f"import of `{module}` is not allowed")
                    break

    def names(self, tree: ast.AST) -> None:
        pol = _policy()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                if node.id in pol.forbidden_builtins and not _shadowed(node):
                    self.add(node, pol.forbidden_builtins[node.id], f"`{node.id}` is not allowed in a kernel module")
                elif _is_dunder(node.id) and node.id not in pol.dunder_names:
                    self.add(node, "escape", f"`{node.id}` is not allowed")
            elif isinstance(node, ast.Attribute):
                if _is_dunder(node.attr) and node.attr not in pol.dunder_attributes:
                    self.add(node, "escape", f"attribute `{node.attr}` is not allowed")
                elif node.attr in pol.forbidden_attributes:
                    self.add(node, pol.forbidden_attributes[node.attr], f"`.{node.attr}` is not allowed")
                else:
                    self._dotted_use(node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
                name = node.args[1] if len(node.args) > 1 else None
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    self.add(node, "escape", "getattr with a computed name is not allowed: use the attribute directly")
                elif _is_dunder(name.value) or name.value in pol.forbidden_attributes:
                    self.add(node, "escape", f"getattr(..., {name.value!r}) is not allowed")
                else:
                    base = _dotted(node.args[0], self.aliases)
                    if base:
                        self._check_dotted(node, f"{base}.{name.value}")

    def _dotted_use(self, node: ast.Attribute) -> None:
        # only the outermost attribute of a chain: torch.cuda.Stream, not also torch.cuda
        dotted = _dotted(node, self.aliases)
        if dotted:
            self._check_dotted(node, dotted)

    def _check_dotted(self, node: ast.AST, dotted: str) -> None:
        hit = _forbidden_rule(dotted)
        if hit:
            rule, prefix = hit
            why = {
                "stream": "extra CUDA streams are not allowed: launch on the current stream",
                "backend-flags": "changing PyTorch's numeric defaults is not allowed: results and timings use the defaults",
                "pure-pytorch": "torch.compile is the baseline, not an answer: write Triton kernels",
            }.get(rule, "not allowed in a kernel module")
            self.add(node, rule, f"`{prefix}`: {why}")
        elif dotted.startswith(_TL + ".") and dotted in self.absent:
            self.add(node, "absent-triton", f"`tl.{dotted[len(_TL) + 1:]}` does not exist in Triton: write it from tl.exp etc.")
        elif dotted.startswith("torch.backends.") and dotted.count(".") >= 2 and _is_call_target(node):
            self.add(node, "backend-flags", f"`{dotted}(...)` changes PyTorch's backend flags: not allowed")

    def assignments(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = node.targets
            else:
                continue
            for t in _flatten_targets(targets):
                base = t.value if isinstance(t, (ast.Attribute, ast.Subscript)) else None
                dotted = _dotted(t, self.aliases) if isinstance(t, ast.Attribute) else None
                if dotted is None and base is not None:
                    dotted = _dotted(base, self.aliases)
                if not dotted or dotted.split(".")[0] not in _ROOTS:
                    continue
                if dotted.startswith("torch.backends"):
                    self.add(t, "backend-flags", f"assigning `{dotted}` changes PyTorch's backend flags: results and timings use the defaults")
                else:
                    self.add(t, "monkeypatch", f"assigning `{dotted}` monkeypatches {dotted.split('.')[0]}: not allowed")

    def kernels_present(self, tree: ast.Module, kernels: list[ast.FunctionDef]) -> None:
        if not kernels:
            self.add(tree.body[0] if tree.body else tree, "no-kernel",
                     "no @triton.jit kernel: a pure-PyTorch answer is not accepted, write at least one Triton kernel")
            return
        names = {k.name for k in kernels}
        used = {
            n.id for n in ast.walk(tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names
        }
        if not used:
            self.add(kernels[0], "no-kernel",
                     f"kernel{'s' if len(names) > 1 else ''} {', '.join(sorted(names))} never launched: ModelNew must run its Triton kernels")

    def stage(self, kernels: list[ast.FunctionDef], rules: StageRules) -> None:
        for k in kernels:
            params = [a.arg for a in k.args.args]
            local = _local_assignments(k)
            stores, loads = [], []
            for node in ast.walk(k):
                if isinstance(node, ast.Call):
                    fn = _dotted(node.func, self.aliases)
                    if fn in (f"{_TL}.store", f"{_TL}.load"):
                        ptr = node.args[0] if node.args else next((kw.value for kw in node.keywords if kw.arg == "pointer"), None)
                        root = _pointer_root(ptr, params, local) if ptr is not None else None
                        (stores if fn.endswith("store") else loads).append((node, root))
            stores.sort(key=lambda s: (s[0].lineno, s[0].col_offset))
            roots = sorted({r for _, r in stores if r})
            limit = rules.max_stores_per_kernel
            if limit is not None and len(roots) > limit:
                lines = ", ".join(str(n.lineno) for n, _ in stores)
                output = stores[-1][1]  # the output is usually stored last: point at the first other store
                extra = next((n for n, r in stores if r != output), stores[-1][0])
                self.add(extra, "stage-stores",
                         f"kernel `{k.name}` stores to {len(roots)} buffers ({', '.join(roots)}; tl.store at lines {lines}): "
                         f"this stage allows {limit} per kernel — keep intermediates in registers and store only the output")
            if rules.forbid_store_then_load:
                for snode, sroot in stores:
                    for lnode, lroot in loads:
                        if sroot and sroot == lroot and (lnode.lineno, lnode.col_offset) > (snode.lineno, snode.col_offset):
                            self.add(lnode, "stage-store-then-load",
                                     f"kernel `{k.name}` loads `{sroot}` after storing to it (line {snode.lineno}): "
                                     "an intermediate round trip through memory — keep the value in registers")
                            break


def _bound_names(scope: ast.AST) -> set[str]:
    """Names a function (its parameters and assignments) or a module binds in its own scope."""
    names: set[str] = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        names.update(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x)
    body = scope.body if isinstance(scope.body, list) else [scope.body]
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            continue  # a nested scope binds for itself
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        stack.extend(ast.iter_child_nodes(n))
    return names


def _shadowed(node: ast.Name) -> bool:
    """Whether a builtin's name is rebound in an enclosing function or at module level (`def f(input)`)."""
    scope = getattr(node, "_parent", None)
    while scope is not None:
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)) and node.id in _bound_names(scope):
            return True
        scope = getattr(scope, "_parent", None)
    return False


def _is_call_target(node: ast.AST) -> bool:
    return isinstance(getattr(node, "_parent", None), ast.Call) and node._parent.func is node  # type: ignore[attr-defined]


def _flatten_targets(targets: list[ast.expr]) -> list[ast.expr]:
    out: list[ast.expr] = []
    for t in targets:
        if isinstance(t, (ast.Tuple, ast.List)):
            out.extend(_flatten_targets(list(t.elts)))
        elif isinstance(t, ast.Starred):
            out.extend(_flatten_targets([t.value]))
        else:
            out.append(t)
    return out


def _local_assignments(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    local: dict[str, ast.expr] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            local.setdefault(node.targets[0].id, node.value)
    return local


def _pointer_root(expr: ast.expr, params: list[str], local: dict[str, ast.expr], depth: int = 0) -> str | None:
    """The kernel parameter a pointer expression is based on (`out_ptr + offs` -> 'out_ptr')."""
    if depth > 8:
        return None
    found: list[str] = []
    for n in ast.walk(expr):
        if isinstance(n, ast.Name):
            if n.id in params:
                found.append(n.id)
            elif n.id in local and local[n.id] is not expr:
                r = _pointer_root(local[n.id], params, local, depth + 1)
                if r:
                    found.append(r)
    if not found:
        return None
    ptrs = [f for f in found if "ptr" in f.lower()]
    return (ptrs or found)[0]


def _normalize_absent(absent: list[str]) -> set[str]:
    out = set()
    for name in absent:
        name = name.strip()
        for prefix in ("triton.language.", "tl."):
            if name.startswith(prefix):
                name = name[len(prefix):]
        out.add(f"{_TL}.{name}")
    return out


def check(code: str, stage_rules: StageRules, absent: list[str]) -> list[Violation]:
    """Every rule the code breaks, in line order (empty: it may run). Raises SyntaxError for unparsable code."""
    tree = ast.parse(code)
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._parent = parent  # type: ignore[attr-defined]
    aliases = _aliases(tree)
    c = _Checker(aliases=aliases, absent=_normalize_absent(absent))
    c.imports(tree)
    c.names(tree)
    c.assignments(tree)
    kernels = _kernels(tree, aliases)
    c.kernels_present(tree, kernels)
    c.stage(kernels, stage_rules)
    unique = {(v.line, v.rule, v.message): v for v in c.violations}
    return sorted(unique.values(), key=lambda v: (v.line, v.rule))
