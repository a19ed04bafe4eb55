"""Static policy: an allowlist checked on the candidate's AST before any of it runs (data in agent/data/policy.toml). Pure:
code in, violations out, in time linear in the code's size and never longer than a hard cap. Over 400 lines because
_Checker is one tree walk whose visits share the scope's state (aliases, own instances, kernel names): each rule's
reading of the tree lives in its own module (names, owned, ownself, tells, kernelrules, ...), the walk stays one.

What a kernel module may do: import the allowed modules (and reach no other module through their attributes:
agent.harness.static.reach), call the allowed builtins, use triton's decorators and triton.language. What it may not:
exec/eval/compile, dynamic imports, computed getattr, frame/code/traceback objects, dunder paths to globals and
subclasses, monkeypatching torch or triton, changing PyTorch's numeric flags, side streams, files, pointers made from
integers. The stage adds its own rules (memory-fusion: no value stored and loaded back at the same address).

What could tell the harness's recorded calls from the others (clock registers, addresses, a warning's place, the
GPU's state) is read by agent.harness.static.tells. This is the first, cheap fence. The wall is the sandbox (contain.py);
what the code does at run time is checked where it happens (agent.harness.worker.trace, agent.harness.judge.rules).
"""

from __future__ import annotations

import ast
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache

from pydantic import BaseModel

from agent.datafiles import load_toml
from agent.harness.static import environ, kernelrules, tells
from agent.harness.worker.annotations import annotations_as_code
from agent.harness.static.hooks import allocator_hooks
from agent.harness.static.kernelrules import kernel_names  # noqa: F401  (the public name callers import from here)
from agent.harness.worker.kernelsource import hidden_sources
from agent.harness.static.mainguard import skip_main_guards, skip_type_checking
from agent.harness.static.names import aliases as find_aliases
from agent.harness.static.names import builtin_uses, chain_root, dotted
from agent.harness.static.owned import is_own, own_instances
from agent.harness.static.ownnames import reaches_only_own
from agent.harness.static.ownself import SELF, is_own_self, unbound_uses
from agent.harness.static.reach import Reach
from agent.schema import StageRules

_TL = "triton.language"
_ROOTS = {"torch", "triton"}
MAX_CODE_BYTES = 256 * 1024
TIME_CAP_S = 5.0
_FORMAT_DUNDER = re.compile(r"\{[^{}]*__\w*")  # "{0.__class__}".format(x): attribute access inside a string
_FORMAT_FIELD, _DOT_NAME = re.compile(r"\{([^{}]*)"), re.compile(r"\.(\w+)")  # "{0.a.b}": the attributes it reads


class Violation(BaseModel):
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message} [{self.rule}]"


class _Data(BaseModel):
    allowed_modules: list[str]
    triton_api: list[str]
    module_api: dict[str, list[str]]
    module_paths: dict[str, list[str]]
    builtins: set[str]
    private_paths: set[str]
    guarded_imports: list[str]
    flag_defaults: dict[str, bool]
    forbidden: dict[str, str]
    forbidden_attributes: dict[str, str]
    denied_attribute_modules: list[str]
    dunder_attributes: set[str]
    dunder_names: set[str]


@lru_cache(maxsize=1)
def _data() -> _Data:
    raw = load_toml("policy.toml")
    dunders = raw.pop("dunders")
    return _Data(**raw, dunder_attributes=set(dunders["attributes"]), dunder_names=set(dunders["names"]))


@lru_cache(maxsize=1)
def _reach() -> Reach:
    d = _data()
    return Reach(d.allowed_modules, d.denied_attribute_modules)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


class _TooSlow(Exception):
    pass


@dataclass
class _Checker:
    tree: ast.Module
    aliases: dict[str, str]
    absent: set[str]
    deadline: float
    own_classes: set[str] = field(default_factory=set)
    own_instances: tuple[set[str], set[str]] | None = None
    violations: list[Violation] = field(default_factory=list)
    _ticks: int = 0

    def owned(self) -> tuple[set[str], set[str]]:
        """The names and self attributes bound only to the candidate's own instances (computed once, where needed)."""
        if self.own_instances is None:
            self.own_instances = own_instances(self.tree, self.own_classes)
        return self.own_instances

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.violations.append(Violation(line=getattr(node, "lineno", 0), rule=rule, message=message))

    def tick(self) -> None:
        self._ticks += 1
        if self._ticks % 256 == 0 and time.thread_time() > self.deadline:
            raise _TooSlow

    # ---------------------------------------------------------------- imports and builtins

    def imports(self, node: ast.Import | ast.ImportFrom) -> None:
        reach = _reach()
        allowed_list = ", ".join(m for m in _data().allowed_modules if m != "__future__")
        if isinstance(node, ast.ImportFrom):
            if node.level:
                self.add(node, "import", "relative imports are not allowed")
                return
            module = node.module or ""
            if environ.importable(module, [a.name for a in node.names]):
                return  # `from os import environ`: each use is judged by environ.environment_uses
            if _guarded(module) or all(_guarded(f"{module}.{a.name}") for a in node.names):
                return  # `from triton.testing import do_bench`: each use of the names is judged by `name`
            # `from triton.runtime import driver` (Triton's tutorials): a package on the way to a listed triton path,
            # each name then judged as that path
            on_the_way = module.startswith("triton.") and any(a.startswith(module + ".") for a in _data().triton_api)
            on_the_way |= module in _data().module_paths  # `from torch.jit import ignore`: each name judged as a path
            # `from torch.nn.utils import parametrize`: a package on the way to an allowed module with listed paths
            on_the_way |= any(m.startswith(module + ".") and reach.allowed(m) for m in _data().module_paths)
            on_the_way |= any(p.startswith(module + ".") for p in _data().private_paths)  # torch.nn.modules.utils
            if not reach.allowed(module) and not on_the_way:
                self.add(node, "import", f"import of `{module}` is not allowed (a kernel module may import: {allowed_list})")
                return
            if any(a.name == "*" for a in node.names):
                self.add(node, "import", f"`from {module} import *` is not allowed: import names explicitly")
            for a in node.names:
                if a.name != "*" and not self.path(node, f"{module}.{a.name}"):
                    return
            return
        for a in node.names:
            if _guarded(a.name):
                continue  # its uses are judged where they are (`name`, `path`): none outside the main guard
            if a.name in _data().module_paths and self._only_attribute_uses(a.asname or a.name.split(".")[0]):
                continue  # `import torch.utils.checkpoint as cp`: each `cp.x` is judged as its path, never a value
            if not reach.allowed(a.name) and not environ.importable(a.name):
                self.add(node, "import", f"import of `{a.name}` is not allowed (a kernel module may import: {allowed_list})")
                return

    def _only_attribute_uses(self, alias: str) -> bool:
        """Whether every use of `alias` reads an attribute of it (so `path` judges each), never the module as a value."""
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Name) and n.id == alias and not isinstance(getattr(n, "_parent", None), ast.Attribute):
                return False
        return True

    def builtins(self, code: str) -> None:
        allowed = _data().builtins
        for name in builtin_uses(code):
            if name not in allowed and not _is_dunder(name):
                node = next((n for n in ast.walk(self.tree) if isinstance(n, ast.Name) and n.id == name), self.tree)
                self.add(node, "escape" if name in {"globals", "locals", "vars", "breakpoint", "memoryview"} else
                         {"open": "file", "input": "file", "eval": "exec", "exec": "exec", "compile": "exec",
                          "__import__": "import", "setattr": "monkeypatch", "delattr": "monkeypatch"}.get(name, "builtin"),
                         f"`{name}` is not allowed in a kernel module")

    # ---------------------------------------------------------------- paths and attributes

    def path(self, node: ast.AST, path: str) -> bool:
        """Check one resolvable dotted path; False when it was refused."""
        d = _data()
        if _default_precision_call(node, path) or path in d.private_paths:
            return True  # a listed private helper, by its exact path (nothing under it: `.__wrapped__`, ...)
        if _guarded(path):
            self.add(node, "escape", f"`{path}`: {_GUARDED_WHY}")
            return False
        for prefix, rule in d.forbidden.items():
            if path == prefix or path.startswith(prefix + "."):
                self.add(node, rule, f"`{prefix}`: {_WHY.get(rule, 'not allowed in a kernel module')}")
                return False
        parts = path.split(".")
        for part in parts[1:]:  # `from torch.cuda import memory_stats` reaches the attribute as a name
            if part in d.forbidden_attributes:
                rule = d.forbidden_attributes[part]
                self.add(node, rule, f"`{path}` is not allowed" + (f": {_WHY[rule]}" if rule in _WHY else ""))
                return False
        for i, part in enumerate(parts[1:], start=1):
            if part.startswith("_") and not _is_dunder(part):
                self.add(node, "escape", f"`{'.'.join(parts[: i + 1])}` is private to {parts[0]}: use the public API")
                return False
            if _is_dunder(part) and part not in d.dunder_attributes:
                self.add(node, "escape", f"`{'.'.join(parts[: i + 1])}` is not allowed")
                return False
        only = next(((m, paths) for m, paths in d.module_paths.items() if path == m or path.startswith(m + ".")), None)
        if only is not None:
            module, paths = only
            if any(path == p or path.startswith(p + ".") for p in paths):
                return True  # a listed path of a module that is otherwise refused
            if path == module and _reach().allowed(module):
                return True  # the module itself, imported by name (`from torch.nn.utils import parametrize`)
            self.add(node, "import", f"`{path}`: of {module}, a kernel module may use only {', '.join(paths)}")
            return False
        if parts[0] == "triton" and not path.startswith(_TL + ".") and path != _TL:
            if path.startswith("triton.__version__."):
                return True  # a str's own methods (a version check); its dunders were refused above
            if not any(path == api or api.startswith(path + ".") for api in d.triton_api):
                self.add(node, "escape", f"`{path}` is not part of the triton API a kernel module may use "
                         "(triton.jit/autotune/heuristics/Config/cdiv/next_power_of_2 and triton.language)")
                return False
            return True  # one of the listed paths (some pass through triton.runtime, which is otherwise refused)
        api = d.module_api.get(parts[0])
        if api is not None and len(parts) > 1 and not any(path == a or a.startswith(path + ".") for a in api):
            self.add(node, "escape", f"`{path}` is not part of the {parts[0]} API a kernel module may use "
                     f"({', '.join(api)})")
            return False
        if path.startswith(_TL + ".") and path in self.absent:
            self.add(node, "absent-triton", f"`tl.{path[len(_TL) + 1:]}` does not exist in Triton: write it from tl.exp etc.")
            return False
        res = _reach().resolve(path)
        if res.refused:
            self.add(node, "import", f"`{res.via}` is the module {res.refused}, which a kernel module may not use")
            return False
        return True  # also where it is unknown here: a name this torch lacks fails at run time, nothing to refuse

    def attribute(self, node: ast.Attribute) -> None:
        d = _data()
        name = node.attr
        if name in d.forbidden_attributes and not tells.own_name(node, self.own_classes):
            rule = d.forbidden_attributes[name]
            self.add(node, rule, f"`.{name}` is not allowed" + (f": {_WHY[rule]}" if rule in ("host-compute", "clock",
                                                                                          "observe") else ""))
            return
        tell = {tells.INLINE_ASM: tells.inline_asm, tells.ADDRESS: tells.address}.get(name)
        if tell is not None and (refused := tell(node)) is not None:
            self.add(node, *refused)
        if _is_dunder(name):
            if name not in d.dunder_attributes:
                self.add(node, "escape", f"attribute `{name}` is not allowed")
            return
        parent = getattr(node, "_parent", None)
        outermost = not (isinstance(parent, ast.Attribute) and parent.value is node)
        path = dotted(node, self.aliases)
        if path is not None:
            if outermost and path.split(".")[0] in _reach().exact | _ROOTS:
                self.path(node, path)
            return
        root = chain_root(node)
        own = isinstance(root, ast.Name) and node.value is root and (root.id in self.own_classes or
                                                                     root.id in SELF and is_own_self(root))
        # an own instance held by a name or by self (red7's self: a method's own first parameter, never a name)
        own = own or name.startswith("_") and is_own(node.value, *self.owned()) and not (
            isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name)
            and not is_own_self(node.value.value))
        if name.startswith("_") and not own:
            self.add(node, "escape", f"private attribute `.{name}` is not allowed here: use the public API")
        elif name in _reach().denied_names and not own:
            self.add(node, "import", f"`.{name}` names a module a kernel module may not use")

    def getattr_call(self, node: ast.Call) -> None:
        fn = node.func
        if not (isinstance(fn, ast.Name) and fn.id in {"getattr", "hasattr"}):
            return
        if fn.id == "getattr" and (any(isinstance(a, ast.Starred) for a in node.args) or node.keywords):
            self.add(node, "escape", "getattr with unpacked arguments is not allowed: use the attribute directly")
            return
        if len(node.args) < 2:
            return
        name = node.args[1]
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            if fn.id == "getattr" and not reaches_only_own(node.args[0], name, frozenset(_reach().exact)):
                self.add(node, "escape", "getattr with a computed name is not allowed: use the attribute directly")
            return
        synthetic = ast.Attribute(value=node.args[0], attr=name.value, ctx=ast.Load())
        ast.copy_location(synthetic, node)
        synthetic._parent = node  # type: ignore[attr-defined]
        self.attribute(synthetic)

    def name(self, node: ast.Name) -> None:
        """getattr only called by its name: passed around (an alias, functools.reduce, map, a default argument) it
        reads any attribute with a name the check never sees."""
        parent = getattr(node, "_parent", None)
        held = self.aliases.get(node.id)
        if held is not None and _guarded(held) and isinstance(node.ctx, ast.Load) and \
                not (isinstance(parent, ast.Attribute) and parent.value is node):  # an attribute's path is judged
            self.add(node, "escape", f"`{held}`: {_GUARDED_WHY}")
        if node.id == "getattr" and isinstance(node.ctx, ast.Load) and \
                not (isinstance(parent, ast.Call) and parent.func is node):
            self.add(node, "escape", "`getattr` may only be called directly, with the attribute's name as a string "
                     "literal: passed around, it reads attributes the check cannot see")

    def string(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _FORMAT_DUNDER.search(node.value):
            self.add(node, "escape", "a format string that reaches a dunder attribute is not allowed")
        if isinstance(node.value, str) and "{" in node.value:  # "{0.created}".format(record) reads an attribute
            for name in (n for field in _FORMAT_FIELD.findall(node.value) for n in _DOT_NAME.findall(field)):
                if name in _data().forbidden_attributes:
                    self.add(node, _data().forbidden_attributes[name], f"a format string that reads `.{name}` is "
                             "not allowed")
        if isinstance(node.value, str) and (register := tells.clock_register(node.value)):
            self.add(node, "clock", f"`{register}` is a clock register: {_WHY['clock']}")

    def assignment(self, target: ast.expr) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.assignment(t)
            return
        if isinstance(target, ast.Starred):
            self.assignment(target.value)
            return
        if not isinstance(target, (ast.Attribute, ast.Subscript)):
            return
        path = dotted(target, self.aliases) if isinstance(target, ast.Attribute) else dotted(target.value, self.aliases)
        if path and path.split(".")[0] in _reach().exact | _ROOTS:
            if path.startswith("torch.backends"):
                self.add(target, "backend-flags", f"assigning `{path}` changes PyTorch's backend flags: results and "
                         "timings use the defaults")
            else:
                self.add(target, "monkeypatch", f"assigning `{path}` monkeypatches {path.split('.')[0]}: not allowed")
            return
        root = chain_root(target)
        if isinstance(root, ast.Call) and isinstance(root.func, ast.Name) and root.func.id == "type":
            self.add(target, "monkeypatch", "assigning attributes of type(...) changes a class for everyone: not allowed")

    def class_def(self, node: ast.ClassDef) -> None:
        """A tensor subclass (or any class hooking torch's dispatch) can compute its value when the harness reads it,
        after the forward's checks are over: outputs must be plain tensors."""
        for base in node.bases:
            if dotted(base, self.aliases) in ("torch.Tensor", "torch.nn.Parameter"):
                self.add(node, "escape", f"class `{node.name}` subclasses {dotted(base, self.aliases)}: outputs must be "
                         "plain tensors")
        for item in node.body:
            if tells.ADDRESS in _bound_names(item):
                self.add(item, "escape", f"`{tells.ADDRESS}` makes an object Triton takes as a pointer to any address: "
                         "pass tensors to kernels")
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in _TENSOR_HOOKS:
                self.add(item, "escape", f"`{item.name}` hooks PyTorch's dispatch: not allowed in a kernel module")

    def call(self, node: ast.Call) -> None:
        for tell in (tells.callers, tells.pinned, tells.overlapped):
            if (refused := tell(node)) is not None:
                self.add(node, *refused)
        fn = node.func.func if isinstance(node.func, ast.Call) else node.func  # type(x)(name, bases, namespace)
        if isinstance(fn, ast.Name) and fn.id == "type" and (len(node.args) + len(node.keywords) > 1 or
                                                             fn is not node.func and len(node.args) == 3):
            self.add(node, "escape", "type(name, bases, namespace) builds a class from strings, past the checks on "
                     "class bodies: write a class statement")
        path = dotted(node.func, self.aliases)
        if path == "functools.wraps" and not _lone_decorator(node):
            self.add(node, "escape", "functools.wraps copies a namespace into what it is applied to (attributes set by "
                     "names held in strings, as setattr): only as the one decorator of a def, @functools.wraps(fn)")
        if path and path.startswith("torch.backends.") and path.count(".") >= 2 and \
                path.rsplit(".", 1)[1] not in _BACKEND_QUERIES:
            self.add(node, "backend-flags", f"`{path}(...)` changes PyTorch's backend flags: not allowed")


_GUARDED_WHY = "a benchmark's module, used only by the self-test under `if __name__ == \"__main__\":` (a kernel \
module never times itself)"


def _guarded(path: str) -> bool:
    """`path` is a module an answer may import for its main-guarded self-test, or something under one."""
    return any(path == m or path.startswith(m + ".") for m in _data().guarded_imports)


def _lone_decorator(node: ast.Call) -> bool:
    """`node` (one positional argument, no keywords) is the only decorator of a def: what it copies lands on the
    candidate's own function, never on a tensor or a kernel object (a second decorator could be triton.jit)."""
    parent = getattr(node, "_parent", None)
    return len(node.args) == 1 and not node.keywords and isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) \
        and len(parent.decorator_list) == 1 and parent.decorator_list[0] is node


_WHY = {
    "stream": "extra CUDA streams are not allowed: launch on the current stream",
    "backend-flags": "changing PyTorch's numeric defaults is not allowed: results and timings use the defaults",
    "pure-pytorch": "torch.compile is the baseline, not an answer: write Triton kernels",
    "host-compute": "a result computed outside PyTorch's operators escapes the harness's checks",
    "escape": "not allowed in a kernel module",
    "graph": "CUDA graphs replay work the harness cannot check: launch the kernels on every call",
    "clock": "a kernel module never times itself: a clock could tell the harness's checked calls from the others",
    "observe": "a kernel module never reads the harness's or the GPU's state (allocator statistics, whether the "
               "stream is idle, NVML readings): they tell the harness's checked calls from the others",
}
_TENSOR_HOOKS = {"__torch_function__", "__torch_dispatch__"}


def _bound_names(item: ast.stmt) -> set[str]:
    """The names a class-body statement binds (a method, an assignment, an annotated one)."""
    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {item.name}
    targets = item.targets if isinstance(item, ast.Assign) else [item.target] \
        if isinstance(item, (ast.AnnAssign, ast.AugAssign)) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
# torch.backends calls that only read (whether a backend is there, its version): the flags are compared at run time
_BACKEND_QUERIES = {"is_available", "version", "is_built"}
# Backend flags an answer may set at import or in __init__, each to one value only: cudnn.benchmark and
# cudnn.deterministic on, TF32 off for cuDNN and matmul (honest answers set them "to match the fp32 reference" or "for
# speed"). The worker puts every one back to the default after the import and after each ModelNew it builds
# (agent.harness.worker.trusted.restore_speed_flags): its calls run, and are timed, under the defaults as the baseline's are.
# One value each, so nothing can set a flag back: set by forward, it is still set when the flags are compared
# (tampered). matmul.allow_tf32 = False is already the default: it never leaves it.
_SPEED_FLAGS = {"torch.backends.cudnn.benchmark": True, "torch.backends.cudnn.deterministic": True,
                "torch.backends.cudnn.allow_tf32": False, "torch.backends.cuda.matmul.allow_tf32": False}
# torch.set_float32_matmul_precision("highest"): PyTorch's default precision, named (the answer's own line `for exact
# fp32`); any other argument lowers the numerics and stays refused. Undone with the flags above.
_DEFAULT_PRECISION = ("torch.set_float32_matmul_precision", "highest")


def _speed_flag_on(node: ast.AST, target: ast.expr, aliases: dict[str, str]) -> bool:
    """`flag = value` (or `flag = other_flag = value`) where every target is a speed flag and value is its one allowed
    value (`a = flag = True` binds a name to the flag's value: not a flag's line), or, at import, where every target
    is a flag and value its default (no change: [flag_defaults] in policy.toml)."""
    if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)):
        return False
    paths = [dotted(t, aliases) if isinstance(t, ast.Attribute) else None for t in node.targets]
    if target not in node.targets:
        return False
    if all(p in _SPEED_FLAGS and node.value.value is _SPEED_FLAGS[p] for p in paths):
        return True
    defaults = _data().flag_defaults
    return _at_import(node) and all(p in defaults and node.value.value is defaults[p] for p in paths)


def _at_import(node: ast.AST) -> bool:
    """`node` runs only while the module is imported: no def, lambda or class encloses it (after the import the worker
    puts the speed flags back, and a flag left at its default needs nothing put back)."""
    parent = getattr(node, "_parent", None)
    while parent is not None:
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        parent = getattr(parent, "_parent", None)
    return True


def _default_precision_call(node: ast.AST, path: str) -> bool:
    """`torch.set_float32_matmul_precision("highest")`: the call's callee, with the default as its one argument."""
    call = getattr(node, "_parent", None)
    return (path == _DEFAULT_PRECISION[0] and isinstance(call, ast.Call) and call.func is node and not call.keywords
            and len(call.args) == 1 and isinstance(call.args[0], ast.Constant)
            and call.args[0].value == _DEFAULT_PRECISION[1])


# ---------------------------------------------------------------- entry point


def _normalize_absent(absent: list[str]) -> set[str]:
    """The prompt's absent functions that the installed Triton really lacks. The seed prompt's list (kept byte for
    byte) names tl.sigmoid and tl.softmax, which Triton has had since 2.x: the list is advice to the LLM, and code
    that calls a function Triton provides is honest and compiles (was: refused, absent-triton)."""
    out = set()
    for name in absent:
        name = name.strip()
        for prefix in ("triton.language.", "tl."):
            name = name.removeprefix(prefix)
        if not _triton_has(name):
            out.add(f"{_TL}.{name}")
    return out


@lru_cache(maxsize=None)
def _triton_has(name: str) -> bool:
    try:
        import triton.language
    except ImportError:
        return False  # no Triton to compile with: the prompt's list stands
    return callable(getattr(triton.language, name, None))


def check(code: str, stage_rules: StageRules, absent: list[str], time_cap_s: float = TIME_CAP_S) -> list[Violation]:
    """Every rule the code breaks, in line order (empty: it may run). Raises SyntaxError for unparsable code."""
    if len(code.encode("utf-8", "replace")) > MAX_CODE_BYTES:
        return [Violation(line=1, rule="size", message=f"the code is over {MAX_CODE_BYTES // 1024} KB: not a kernel module")]
    tree = ast.parse(code)
    lines = re.split(r"\r\n|\r|\n", code)  # as the parser numbers them (not str.splitlines: form feeds, \x1c, ...)
    # annotations first: a string annotation that names a helper makes it live (get_type_hints calls it)
    if annotations_as_code(tree) | skip_main_guards(tree) | skip_type_checking(tree):
        code = ast.unparse(tree)  # for the builtins' scope analysis (the tree keeps the original line numbers)
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._parent = parent  # type: ignore[attr-defined]
    # The cap bounds the analysis of this code, not the machine: it counts this thread's CPU time, and starts after
    # the allowed modules are imported (once per process; seconds on a busy machine).
    _reach().denied_names  # noqa: B018
    own_classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    c = _Checker(tree=tree, aliases=find_aliases(tree, _ROOTS | _reach().exact), absent=_normalize_absent(absent),
                 deadline=time.thread_time() + time_cap_s, own_classes=own_classes)
    try:
        c.builtins(code)
        for node in ast.walk(tree):
            c.tick()
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                c.imports(node)
            elif isinstance(node, ast.Name) and _is_dunder(node.id) and node.id not in _data().dunder_names:
                c.add(node, "escape", f"`{node.id}` is not allowed")
            elif isinstance(node, ast.Name):
                c.name(node)
            elif isinstance(node, ast.Attribute):
                c.attribute(node)
            elif isinstance(node, ast.Call):
                c.getattr_call(node)
                c.call(node)
            elif isinstance(node, ast.Constant):
                c.string(node)
            elif isinstance(node, ast.ClassDef):
                c.class_def(node)
            elif isinstance(node, ast.MatchClass):
                for name in node.kwd_attrs:  # `case object(_C=c)` reads subject._C by name: judged as an attribute
                    read = ast.copy_location(ast.Attribute(value=ast.Name(id="_pattern_subject", ctx=ast.Load()),
                                                           attr=name, ctx=ast.Load()), node)
                    read._parent = node  # type: ignore[attr-defined]
                    c.attribute(read)
            if isinstance(node, (ast.Assign, ast.Delete)):
                for t in node.targets:
                    if not _speed_flag_on(node, t, c.aliases):
                        c.assignment(t)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                c.assignment(node.target)
        for node, message in unbound_uses(tree, set(c.aliases)):
            c.add(node, "escape", message)
        for node, message in allocator_hooks(tree, c.aliases):
            c.add(node, "escape", message)
        for node, message in environ.environment_uses(tree, c.aliases):
            c.add(node, "import", message)
        kernels = kernelrules.kernels(tree, c.aliases)
        for k, line in hidden_sources(lines, kernels):
            c.add(k, "escape", f"kernel `{k.name}`'s decorators hold, at line {line}, a line Triton would take for "
                  "its `def`: the GPU would compile that text, not the checked function")
        kernelrules.kernels_present(c, kernels)
        if stage_rules.forbid_store_then_load:
            kernelrules.store_then_load(c, kernels)
    except (_TooSlow, RecursionError):
        return [Violation(line=1, rule="size", message=f"static analysis of this code takes over {time_cap_s:g} s of CPU time: "
                          "simplify it")]
    unique = {(v.line, v.rule, v.message): v for v in c.violations}
    return sorted(unique.values(), key=lambda v: (v.line, v.rule))
