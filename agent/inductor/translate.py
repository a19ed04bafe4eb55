"""torch.compile's own code for a problem, as an answer: the Captures of one problem (one per size set, static
shapes; agent.harness.worker.capture) and the problem's Model source in, the text of a self-contained KernelBench-style
module out, which the harness judges like any other answer.

What the answer holds: the Triton kernels as plain @triton.jit functions (agent.inductor.kernels), one launcher per
kernel (the grid Inductor recorded, the block sizes, warps and stages its autotuning chose), one `call_sN` per size
set (Inductor's wrapper with its runtime helpers spelled in public torch: agent.inductor.wrapper), and `class ModelNew`: the Model's own __init__ (same layers, same parameters, so the harness's
seeded weights match) and a forward that gathers the graph's inputs from `self` and its arguments by dynamo's sources
and runs the call captured for their shapes.

Trust: the text is Inductor's and is only parsed here (`ast`), never run; every construct is matched against what
this module knows and anything else is refused with a line naming it. The answer then meets the same static policy
and sandbox as an LLM's.
"""

from __future__ import annotations

import ast
import builtins
import keyword
from dataclasses import dataclass, field

from agent.inductor.kernels import KernelError, helper_functions, translate_kernel
from agent.harness.worker.capture import Capture
from agent.inductor.wrapper import (
    RESERVED,
    CannotTranslate,
    Wrapper,
    call_function,
    input_layouts,
    kernel_sources,
    launcher,
    unpacked_args,
)

__all__ = ["CannotTranslate", "translate"]


def translate(captures: list[Capture], model_source: str, interpreter: bool = False) -> str:
    """The answer's text for the problem whose Model is `model_source`, from one capture per size set.
    `interpreter`: for Triton's interpreter (CPU mode), which has no libdevice: libdevice.X is spelled tl.math.X
    (the same function on the GPU but for exp/log's last bits)."""
    if not captures:
        raise CannotTranslate("no Inductor capture to translate")
    try:
        return _translate(captures, model_source, interpreter)
    except KernelError as e:
        raise CannotTranslate(f"Inductor start: {e}") from None


def _translate(captures: list[Capture], model_source: str, interpreter: bool) -> str:
    model = _ModelSource(model_source)
    sources = [i.source for i in captures[0].inputs]
    for c in captures:
        if c.dynamic:
            raise CannotTranslate("Inductor start: a dynamic-shape capture (sizes as symbols); capture each size set "
                                  "with static shapes")
        if [i.source for i in c.inputs] != sources:
            raise CannotTranslate("Inductor start: the captures' graphs take different inputs; they are not of one Model")
        bad = next((i for i in c.inputs if i.kind != "tensor" or i.source is None), None)
        if bad is not None:
            raise CannotTranslate(f"Inductor start: graph input {bad.name} ({bad.source}) is a {bad.kind}, not a "
                                  "tensor from the module or its arguments")
    gather = [model.gather(s or "") for s in sources]
    own = [model.is_argument(s or "") for s in sources]
    sized = [_Sized(c, i if len(captures) > 1 else None, interpreter) for i, c in enumerate(captures)]
    keys = [s.key(own) for s in sized]
    if len(set(keys)) != len(keys):
        raise CannotTranslate("Inductor start: two captures were made at the same sizes")
    helpers = set().union(*(s.helpers for s in sized))
    helper_text, helper_libdevice = helper_functions(helpers, interpreter)
    libdevice = helper_libdevice or any(s.libdevice for s in sized)
    c0 = captures[0]
    parts = [f'"""ModelNew: the Triton kernels and wrapper torch.compile (Inductor, torch {c0.torch_version}, triton '
             f'{c0.triton_version}, {c0.gpu}) generated for the problem\'s Model, made self-contained; captured at '
             f'{len(captures)} size set{"s" if len(captures) > 1 else ""} (static shapes): forward runs the code '
             'captured for its inputs\' shapes."""',
             "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl" +
             ("\nfrom triton.language.extra import libdevice" if libdevice else "") +
             "".join(f"\n{line}" for line in model.imports)]
    parts += helper_text
    for s in sized:
        parts += s.functions
    table = ",\n".join(f"    {k!r}: {s.call_name}" for k, s in zip(keys, sized))
    parts.append(f"CAPTURED = {{\n{table},\n}}\nCAPTURED_FOR = {_described(sized, gather, own)!r}")
    parts.append(model.model_new(gather, own))
    return "\n\n\n".join(parts) + "\n"


def _described(sized: list[_Sized], gather: list[str], own: list[bool]) -> str:
    """The captured sizes of the forward's own tensors, for the one-line error at any other size."""
    def one(s: _Sized) -> str:
        return ", ".join(f"{g} {tuple(size)}" for (size, _), g, o in zip(s.layouts, gather, own) if o)
    return " | ".join(one(s) for s in sized)


# ---------------------------------------------------------------- one capture


@dataclass
class _Sized:
    """One capture: its kernels and launchers as text, its call function, the shapes it was captured at."""

    capture: Capture
    index: int | None
    interpreter: bool = False
    functions: list[str] = field(default_factory=list)
    helpers: set[str] = field(default_factory=set)
    libdevice: bool = False
    layouts: list[tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)
    call_name: str = ""
    names: dict[str, str] = field(default_factory=dict)  # Inductor's kernel name -> the answer's

    def __post_init__(self) -> None:
        tree = ast.parse(self.capture.code)
        kernels = kernel_sources(tree)
        suffix = "" if self.index is None else f"_s{self.index}"
        self.call_name = f"call{suffix or '_s0'}"
        self.names = {k: k + suffix for k in kernels}
        for name, src in kernels.items():
            launch = self.capture.kernels.get(name)
            if launch is None:
                raise CannotTranslate(f"Inductor start: kernel {name} has no recorded launch in the capture")
            t = translate_kernel(name, src, self.names[name], self.interpreter)
            self.functions.append("\n\n".join(t.functions))
            self.functions.append(launcher(self.names[name], launch))
            self.helpers |= t.helpers
            self.libdevice |= t.libdevice
        self.functions.append(self._call(call_function(tree)))

    def key(self, own: list[bool]) -> tuple:
        """The dispatch key: every input's shape, and the strides of the forward's own tensors (the caller's)."""
        return tuple(size for size, _ in self.layouts) + tuple(stride for (_, stride), o in zip(self.layouts, own) if o)

    def _call(self, fn: ast.FunctionDef) -> str:
        body = list(fn.body)
        inputs = [i.name for i in self.capture.inputs]
        names = unpacked_args(body)
        if len(names) != len(inputs):
            raise CannotTranslate(f"Inductor start: call() unpacks {len(names)} inputs, the capture records {len(inputs)}")
        layouts = input_layouts(body, names)
        missing = [n for n in names if n not in layouts]
        if missing:
            raise CannotTranslate(f"Inductor start: no assert_size_stride for {', '.join(missing)}: the layout Inductor "
                                  "compiled for is unknown")
        self.layouts = [layouts[n] for n in names]
        stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        clash = {n for n in stored if n in RESERVED or n.startswith(("launch_", "helper_", "call_", "CAPTURED"))}
        clash |= stored & set(self.names.values())
        if clash:
            raise CannotTranslate(f"Inductor start: call() assigns {', '.join(sorted(clash))}, a name the answer uses")
        w = Wrapper(self.names, {k: v for k, v in self.capture.kernels.items()}, set(names) | stored,
                     self.capture.returns)
        # the device of the first input that is not a 0-d tensor (Inductor takes CPU scalars as graph inputs too)
        on = next((n for n, (size, _) in zip(names, self.layouts) if size), names[0])
        out = ast.parse(f"def {self.call_name}({', '.join(names)}):\n    device = {on}.device").body[0]
        assert isinstance(out, ast.FunctionDef)
        out.body += w.block(body)
        return ast.unparse(ast.fix_missing_locations(out))


# ---------------------------------------------------------------- the Model's side


class _ModelSource:
    """The problem's Model: its imports, its class body (renamed ModelNew, forward replaced), its forward's
    parameters (dynamo's L['x'] sources name them)."""

    def __init__(self, source: str) -> None:
        tree = ast.parse(source)
        cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
        if cls is None:
            raise CannotTranslate("Inductor start: the problem has no class Model")
        forward = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
        if forward is None:
            raise CannotTranslate("Inductor start: the problem's Model has no forward")
        self.cls, self.forward = cls, forward
        a = forward.args
        self.params = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs][1:]] + \
            [x.arg for x in (a.vararg, a.kwarg) if x is not None]
        self.imports = [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                        and ast.unparse(n) not in ("import torch", "import torch.nn as nn")]
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name != "Model"}
        defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        kept = [n for stmt in cls.body if stmt is not forward for n in ast.walk(stmt)]  # what ModelNew copies
        used = {n.id for n in kept if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        bound = {n.id for n in kept if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        bound |= {x.arg for n in kept if isinstance(n, ast.arguments)
                  for x in [*n.posonlyargs, *n.args, *n.kwonlyargs, n.vararg, n.kwarg] if x is not None}
        outside = sorted((used & defined) - bound - set(dir(builtins)))
        if outside:
            raise CannotTranslate(f"Inductor start: the Model uses {', '.join(outside)}, defined elsewhere in the "
                                  "problem file")

    def is_argument(self, source: str) -> bool:
        return not source.startswith("L['self']")

    def gather(self, source: str) -> str:
        """dynamo's source of a graph input as an expression in forward (self.conv.weight, x, ...)."""
        try:
            node = ast.parse(source, mode="eval").body
        except SyntaxError:
            raise CannotTranslate(f"Inductor start: the graph input source {source!r} does not parse") from None
        return ast.unparse(self._gather(node, source))

    def _gather(self, n: ast.expr, source: str) -> ast.expr:
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == "L" and \
                isinstance(n.slice, ast.Constant):
            name = n.slice.value
            if name == "self" or name in self.params:
                return ast.Name(id=name, ctx=ast.Load())
        elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and \
                n.value.attr in ("_modules", "_parameters", "_buffers") and isinstance(n.slice, ast.Constant) and \
                isinstance(n.slice.value, str):
            owner, key = self._gather(n.value.value, source), n.slice.value
            if key.isidentifier() and not keyword.iskeyword(key):
                return ast.Attribute(value=owner, attr=key, ctx=ast.Load())
            return ast.Call(func=ast.Name(id="getattr", ctx=ast.Load()), args=[owner, ast.Constant(key)], keywords=[])
        elif isinstance(n, ast.Attribute) and not n.attr.startswith("_"):
            return ast.Attribute(value=self._gather(n.value, source), attr=n.attr, ctx=ast.Load())
        elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and type(n.slice.value) is int:
            return ast.Subscript(value=self._gather(n.value, source), slice=n.slice, ctx=ast.Load())
        raise CannotTranslate(f"Inductor start: the graph input source {source!r} is not a module attribute or a "
                              "forward argument")

    def model_new(self, gather: list[str], own: list[bool]) -> str:
        cls = self.cls
        for node in ast.walk(cls):
            if isinstance(node, ast.Name) and node.id == "Model":
                node.id = "ModelNew"
        body = [n for n in cls.body if n is not self.forward]
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        args = [f"arg{i}_1" for i in range(len(gather))]
        key = [f"{a}.shape" for a in args] + [f"{a}.stride()" for a, o in zip(args, own) if o]
        got = " + ', ' + ".join(f"'{g} ' + str(tuple({a}.shape))" for a, g, o in zip(args, gather, own) if o) or "''"
        lines = [f"{a} = {g}" for a, g in zip(args, gather)]
        lines += [f"call = CAPTURED.get(({', '.join(key)},))", "if call is None:",
                  "    raise ValueError('the Inductor start was captured by torch.compile at these sizes only: ' + "
                  f"CAPTURED_FOR + '; this call has ' + {got})",
                  f"return call({', '.join(args)})"]
        sig = ast.unparse(self.forward.args)
        forward = f"def forward({sig}):\n" + "".join(f"    {x}\n" for x in lines)
        cls.name, cls.decorator_list, cls.body = "ModelNew", [], body + ast.parse(forward).body
        return ast.unparse(ast.fix_missing_locations(cls))
