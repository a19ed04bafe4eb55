"""The offline proposer: deterministic, no network, no LLM. It reads the ncu metrics of the current best and
rewrites the kernel from templates (agent/data/kernels/*.py.j2).

It knows one problem family well: a PyTorch op producing an N, C, spatial tensor (a convolution, ...), then
elementwise ops (scale, bias, activations) and a global average pool over the spatial dims: `gap44` and its
kin. `recognise()` reads the problem's Model with torch.fx (traced on the meta device at the timed size) into
a `Plan`; `render()` writes one `Variant` of it as a complete KernelBench-style ModelNew file:

- `row`: one program per (n, c) row; rows are contiguous, so flat 1D offsets (no div/mod) vectorise;
- `split` / `atomic`: S programs per row (partial sums + a tiny combine kernel, or tl.atomic_add into a zeroed
  fp32 output), for when N*C is small against the SM count;
- `persistent`: a grid of a few programs per SM looping over the rows;
- `algebraic` (the `algebraic` stage, ConvTranspose2d only): the spatial mean of a transposed convolution's
  output in closed form from window sums of its input, so the conv output is never written or read.

What to try first follows the metrics (a grid small against the SM count or few warps active: more
programs; DRAM near peak: meta-parameter search around the current best); every answer's first line says
what changed and which figures led to it. State lives in the instance: no variant is proposed twice in a run,
and the same observations give the same proposals.
"""

from __future__ import annotations

import ast
import functools
import importlib
import logging
import math
import textwrap
import tomllib
from importlib import resources
from itertools import product
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.schema import Answer, EvalResult, GPUSpec, Profile, ProblemSpec, Usage, Verdict

log = logging.getLogger(__name__)

MODEL = "offline"

# ncu metric names read from the profile (the memory-fusion stage's set, plus duration when present).
GRID = "launch__grid_size"
WARPS = "sm__warps_active.avg.pct_of_peak_sustained_active"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
DURATION = "gpu__time_duration.sum"

# Decision thresholds. A grid under SMALL_GRID_WAVES x the SM count leaves SMs idle or nearly so; under
# LOW_WARPS_PCT of warp slots active there are too few loads in flight to hide DRAM latency (ncu's
# classification uses the same 25 %); past NEAR_PEAK_DRAM_PCT a reduction is bandwidth-bound and only
# meta-parameters are left to tune (memory-fusion's target is 90 %).
SMALL_GRID_WAVES = 2
LOW_WARPS_PCT = 25.0
NEAR_PEAK_DRAM_PCT = 80.0
# Split reductions aim for at least this many programs per SM.
SPLIT_PROGRAMS_PER_SM = 4

# The meta-parameter space per family, in search order (the first value of a list is not the default:
# defaults are the ANCHORS below).
SPACE: dict[str, dict[str, list[Any]]] = {
    "row": {"block": [1024, 2048, 4096, 8192], "warps": [4, 8, 16], "stages": [1, 2, 3], "split": [1]},
    "split": {"block": [1024, 2048, 4096], "warps": [4, 8], "stages": [1, 2], "split": [2, 4, 8, 16]},
    "atomic": {"block": [1024, 2048, 4096], "warps": [4, 8], "stages": [1, 2], "split": [2, 4, 8, 16]},
    "persistent": {"block": [2048, 4096, 8192], "warps": [4, 8, 16], "stages": [1, 2], "split": [1, 2, 4, 8]},
    # algebraic: block = rows per tile (BH), split = columns per tile (BW)
    "algebraic": {"block": [4, 8, 16, 32], "warps": [2, 4, 8], "stages": [1, 2], "split": [32, 64, 128]},
}
ANCHORS: dict[str, dict[str, int]] = {
    "row": {"block": 2048, "warps": 4, "stages": 2, "split": 1},  # near the plain kernel that reached 91 % DRAM
    "split": {"block": 2048, "warps": 4, "stages": 2, "split": 4},
    "atomic": {"block": 2048, "warps": 4, "stages": 2, "split": 4},
    "persistent": {"block": 4096, "warps": 8, "stages": 2, "split": 4},
    "algebraic": {"block": 8, "warps": 4, "stages": 1, "split": 128},
}
TEMPLATES = {
    "row": "gap_row.py.j2",
    "split": "gap_split.py.j2",
    "atomic": "gap_split_atomic.py.j2",
    "persistent": "gap_persistent.py.j2",
    "algebraic": "convt2d_gap.py.j2",
}
Family = Literal["row", "split", "atomic", "persistent", "algebraic"]


class Unsupported(Exception):
    """The problem is not of a family the offline proposer can rewrite (the message says where it stopped)."""


# ---------------------------------------------------------------- the problem, as a plan


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Operand(_Model):
    """The other side of a binary op: a Python scalar, or a tensor with one value or one per channel."""

    kind: Literal["scalar", "single", "channel"]
    expr: str = Field(description="how ModelNew.forward names it: 'self.multiplier', 'self.bias', '0.5'")


class Op(_Model):
    name: str = Field(description="a key of ops.toml's [binary] or [unary]")
    operand: int | None = Field(default=None, description="index into Plan.operands (binary ops)")


class Plan(_Model):
    """What the problem computes, in the terms the templates need."""

    init_source: str = Field(description="Model.__init__ as ModelNew's (same signature, same parameters)")
    producer: list[str] = Field(description="module attributes ModelNew.forward still calls in PyTorch, in order")
    producer_kind: str
    pre: list[Op] = Field(description="per-element ops before the reduction (up to the last non-affine one)")
    post: list[Op] = Field(description="per-row ops after the mean (affine pre ops are moved here)")
    operands: list[Operand]
    tail: list[str] = Field(default_factory=list, description="PyTorch statements after the Triton part (x = ...)")
    out_ones: int = Field(description="trailing size-1 dims of the output (N, C, 1, ...)")
    batch: int
    channels: int
    length: int = Field(description="spatial elements per (n, c) row at the timed size")
    in_bytes: int
    mid_bytes: int = Field(description="bytes of the producer's output at the timed size")
    algebraic: bool = Field(description="the closed-form rewrite applies (ConvTranspose2d, affine epilogue)")

    @property
    def rows(self) -> int:
        return self.batch * self.channels


@functools.cache
def _ops() -> dict[str, Any]:
    return tomllib.loads(resources.files("agent").joinpath("data/kernels/ops.toml").read_text(encoding="utf-8"))


def _resolve(dotted: str) -> Any:
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


@functools.cache
def _function_table() -> dict[int, tuple[str, str]]:
    """id(torch callable) -> (category, op name), categories: binary, unary, mean, pool, reshape."""
    ops = _ops()
    table: dict[int, tuple[str, str]] = {}
    for cat in ("binary", "unary"):
        for name, spec in ops[cat].items():
            for f in spec.get("functions", []):
                table[id(_resolve(f))] = (cat, name)
    red = ops["reduce"]
    for cat, key in (("mean", "mean_functions"), ("pool", "pool_functions"), ("reshape", "reshape_functions")):
        for f in red[key]:
            table[id(_resolve(f))] = (cat, f)
    return table


def _method_table() -> dict[str, tuple[str, str]]:
    ops = _ops()
    table = {m: (cat, name) for cat in ("binary", "unary") for name, spec in ops[cat].items() for m in spec.get("methods", [])}
    table.update({m: ("mean", m) for m in ops["reduce"]["mean_methods"]})
    table.update({m: ("reshape", m) for m in ops["reduce"]["reshape_methods"]})
    return table


def _module_table() -> dict[str, tuple[str, str]]:
    ops = _ops()
    table = {m: ("unary", name) for name, spec in ops["unary"].items() for m in spec.get("modules", [])}
    table.update({m: ("pool", m) for m in ops["reduce"]["pool_modules"]})
    table.update({m: ("reshape", m) for m in ops["reduce"]["reshape_modules"]})
    return table


def _init_source(source: str) -> str:
    """Model.__init__, renamed for ModelNew and indented as a method: same signature, same parameter order."""
    tree = ast.parse(source)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None) if cls else None
    if init is None:
        raise Unsupported("the problem has no class Model with an __init__")
    for node in ast.walk(init):
        if isinstance(node, ast.Name) and node.id == "Model":
            node.id = "ModelNew"
    if ast.get_docstring(init) is not None:
        init.body = init.body[1:] or [ast.Pass()]
    return textwrap.indent(ast.unparse(init), "    ")


def recognise(problem: ProblemSpec) -> Plan:
    """Read the problem's Model (traced with torch.fx on the meta device at its timed size) into a Plan."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    from agent.problems import load_module

    module = load_module(problem.path, problem.sizes[0].overrides if problem.sizes else None)
    try:
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
        gm = torch.fx.symbolic_trace(model)
        ShapeProp(gm).propagate(*inputs)
    except Exception as e:  # not traceable: not a family we can rewrite
        raise Unsupported(f"cannot trace Model with torch.fx: {type(e).__name__}: {e}") from e
    if len(inputs) != 1 or not isinstance(inputs[0], torch.Tensor):
        raise Unsupported("Model.forward must take one tensor")
    plan = _walk(gm, model, inputs[0])
    return plan.model_copy(update={"init_source": _init_source(problem.path.read_text())})


def _shape(node) -> tuple[int, ...] | None:
    tm = node.meta.get("tensor_meta")
    return tuple(tm.shape) if tm is not None and hasattr(tm, "shape") else None


_ARITH = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "pow": "**", "neg": "-"}


def _walk(gm, model, x) -> Plan:  # noqa: C901 (one pass over the graph, one branch per node kind)
    """The chain producer -> per-element ops -> means/pools -> per-row ops -> PyTorch tail, or Unsupported."""
    import torch

    functions, methods, modules = _function_table(), _method_table(), _module_table()
    nodes = [n for n in gm.graph.nodes if n.op != "get_attr"]
    placeholders = [n for n in nodes if n.op == "placeholder"]
    if len(placeholders) != 1:
        raise Unsupported("Model.forward must take exactly one input")
    cur = placeholders[0]
    producer: list[str] = []
    producer_kind = "input"
    ops: list[tuple[str, Op]] = []  # (phase, op)
    operands: list[Operand] = []
    tail: list[str] = []
    layout: list[int] | None = None  # per current dim: 0 batch, 1 channel, 2+ spatial, -1 reduced (size 1)
    nc: tuple[int, int] | None = None
    mid_shape: tuple[int, ...] | None = None
    kernel_shape: tuple[int, ...] | None = None  # what the Triton part returns (before the PyTorch tail)

    def reduced() -> bool:
        return layout is not None and not any(d >= 2 for d in layout)

    def operand(other) -> int:
        if isinstance(other, bool) or other is None:
            raise Unsupported(f"unsupported operand {other!r}")
        if isinstance(other, (int, float)):
            name = next((k for k, v in vars(model).items()
                         if not k.startswith("_") and type(v) in (int, float) and v == other), None)
            operands.append(Operand(kind="scalar", expr=f"self.{name}" if name else repr(float(other))))
            return len(operands) - 1
        if getattr(other, "op", None) == "get_attr":
            t = functools.reduce(getattr, other.target.split("."), gm)
            shape = tuple(t.shape)
            rank = len(layout) if layout is not None else len(mid_shape)
            padded = (1,) * (rank - len(shape)) + shape
            chan = (layout if layout is not None else [0, 1] + [2] * (rank - 2)).index(1)
            if t.numel() == 1:
                kind = "single"
            elif len(padded) == rank and padded[chan] == nc[1] and all(s == 1 for i, s in enumerate(padded) if i != chan):
                kind = "channel"
            else:
                raise Unsupported(f"operand self.{other.target} of shape {list(shape)} is not per-channel")
            operands.append(Operand(kind=kind, expr=f"self.{other.target}"))
            return len(operands) - 1
        raise Unsupported(f"unsupported operand {other}")

    def torch_stmt(node) -> str:
        """One PyTorch statement for the tail (after the Triton part), assigning to x."""
        def arg(a):
            if a is cur:
                return "x"
            if getattr(a, "op", None) == "get_attr":
                return f"self.{a.target}"
            if hasattr(a, "op"):
                raise Unsupported(f"the tail uses {a.name}, which is not the chain's value")
            if isinstance(a, (list, tuple)):
                inner = ", ".join(arg(i) for i in a)
                return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
            return repr(a)

        args = [arg(a) for a in node.args] + [f"{k}={arg(v)}" for k, v in node.kwargs.items()]
        if node.op == "call_module":
            return f"x = self.{node.target}({', '.join(args)})"
        if node.op == "call_method":
            return f"x = {args[0]}.{node.target}({', '.join(args[1:])})"
        from torch.fx.node import _get_qualified_name

        name = _get_qualified_name(node.target)
        if name.startswith(("_operator.", "operator.")) and name.split(".")[-1] in _ARITH and not node.kwargs:
            sym = _ARITH[name.split(".")[-1]]
            return f"x = {sym}{args[0]}" if len(args) == 1 else f"x = {args[0]} {sym} {args[1]}"
        if not name.startswith("torch."):
            raise Unsupported(f"{name} in the tail")
        return f"x = {name}({', '.join(args)})"

    for node in nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            if node.args[0] is not cur:
                raise Unsupported("forward must return the chain's last value")
            break
        args = list(node.args)
        if cur not in args and cur not in node.kwargs.values():
            raise Unsupported(f"node {node.name} does not continue the chain")
        if tail:  # past the Triton part: everything else stays PyTorch
            tail.append(torch_stmt(node))
            cur = node
            continue
        cat, name, pool_dims, size = "", "", 0, ()
        if node.op == "call_module":
            mod = gm.get_submodule(node.target)
            cat, name = modules.get(type(mod).__name__, ("", ""))
            if not cat and not ops and layout is None:
                producer.append(node.target)
                producer_kind = type(mod).__name__
                cur = node
                continue
            if cat == "pool":  # AdaptiveAvgPool2d(1): pools the last 2 dims
                size = mod.output_size if isinstance(mod.output_size, (tuple, list)) else (mod.output_size,)
                pool_dims = int(type(mod).__name__[-2])
        elif node.op == "call_function":
            cat, name = functions.get(id(node.target), ("", ""))
            if cat == "pool":
                pool_dims = int(name[-2])
                size = node.kwargs.get("output_size", args[1] if len(args) > 1 else None)
                size = tuple(size) if isinstance(size, (tuple, list)) else (size,)
        elif node.op == "call_method":
            cat, name = methods.get(node.target, ("", ""))
        if nc is None:
            s = _shape(cur)
            if not s or len(s) < 3:
                raise Unsupported(f"the pooled tensor must be N, C, spatial... (got {s})")
            nc, mid_shape = (s[0], s[1]), s
        if reduced() and cat not in ("binary", "unary", "mean", "pool"):
            kernel_shape = _shape(cur)
            tail.append(torch_stmt(node))
            cur = node
            continue
        if not cat:
            raise Unsupported(f"{node.target} before the global average pool")
        if cat in ("binary", "unary") and layout is not None and not reduced():
            raise Unsupported(f"{name} between partial reductions")
        phase = "post" if reduced() else "pre"
        if cat == "binary":
            spec = _ops()["binary"][name]
            if any(k != "other" for k in node.kwargs):
                raise Unsupported(f"{name} with {node.kwargs}")
            if len(args) == 1 and "other" in node.kwargs:
                args.append(node.kwargs["other"])
            if len(args) != 2:
                raise Unsupported(f"{name} with {len(args)} arguments")
            if args[0] is cur and args[1] is not cur:
                ops.append((phase, Op(name=name, operand=operand(args[1]))))
            elif args[1] is cur and args[0] is not cur:
                ops.append((phase, Op(name=spec["swapped"], operand=operand(args[0]))))
            else:
                raise Unsupported(f"{name} of the value with itself")
        elif cat == "unary":
            extra = {k: v for k, v in node.kwargs.items() if not (k == "approximate" and v == "none") and k != "inplace"}
            if args[0] is not cur or len(args) > 1 or extra:
                raise Unsupported(f"{name} with arguments {args[1:]} {extra}")
            ops.append((phase, Op(name=name)))
        elif cat == "mean":
            if layout is None:
                layout = [0, 1] + list(range(2, len(mid_shape)))
            dims = node.kwargs.get("dim", args[1] if len(args) > 1 else None)
            keep = node.kwargs.get("keepdim", args[2] if len(args) > 2 else False)
            if dims is None or node.kwargs.get("dtype") is not None:
                raise Unsupported("a mean over all dims (or with a dtype) is not a global average pool")
            dims = [dims] if isinstance(dims, int) else list(dims)
            layout = _reduce(layout, dims, keep)
        elif cat == "pool":
            if layout is None:
                layout = [0, 1] + list(range(2, len(mid_shape)))
            if any(s != 1 for s in size):
                raise Unsupported("an adaptive average pool to a size other than 1")
            layout = _reduce(layout, list(range(len(layout) - pool_dims, len(layout))), True)
        elif cat == "reshape":
            raise Unsupported(f"{name} before the global average pool")
        cur = node

    if not reduced():
        raise Unsupported("no global average pool over all spatial dims")
    kernel_shape = kernel_shape or _shape(cur)
    if not kernel_shape or tuple(kernel_shape[:2]) != nc or any(s != 1 for s in kernel_shape[2:]):
        raise Unsupported(f"the pooled value must be (N, C, 1, ...), not {kernel_shape}")

    binary = _ops()["binary"]
    pre = [op for phase, op in ops if phase == "pre"]
    post = [op for phase, op in ops if phase == "post"]
    # Affine ops commute with the mean: move the trailing ones of `pre` after the reduction.
    cut = max((i + 1 for i, op in enumerate(pre) if not binary.get(op.name, {}).get("affine", False)), default=0)
    pre, post = pre[:cut], pre[cut:] + post

    conv = gm.get_submodule(producer[0]) if len(producer) == 1 else None
    algebraic = (
        conv is not None and type(conv).__name__ in _ops()["algebraic"]["modules"] and not pre
        and getattr(conv, "groups", 0) == 1 and getattr(conv, "padding_mode", "") == "zeros" and x.dim() == 4
    )
    itemsize = torch.empty((), dtype=x.dtype, device="meta").element_size()
    return Plan(
        init_source="", producer=producer, producer_kind=producer_kind, pre=pre, post=post, operands=operands,
        tail=tail, out_ones=len(kernel_shape) - 2, batch=nc[0], channels=nc[1], length=math.prod(mid_shape[2:]),
        in_bytes=x.numel() * itemsize, mid_bytes=math.prod(mid_shape) * itemsize, algebraic=algebraic,
    )


def _reduce(layout: list[int], dims: list[int], keep: bool) -> list[int]:
    """The layout after a mean over `dims` (spatial or already-reduced size-1 dims only)."""
    rank = len(layout)
    dims = sorted({d % rank for d in dims})
    if any(layout[d] in (0, 1) for d in dims):
        raise Unsupported("the mean reduces the batch or channel dim")
    if keep:
        return [(-1 if i in dims else d) for i, d in enumerate(layout)]
    return [d for i, d in enumerate(layout) if i not in dims]


# ---------------------------------------------------------------- variants and code


class Variant(_Model):
    """One point of the search: a template and its meta-parameters."""

    family: Family
    block: int = Field(description="elements per load (algebraic: input rows per tile)")
    warps: int
    stages: int
    split: int = Field(default=1, description="split/atomic: programs per row; persistent: programs per SM; "
                                              "algebraic: input columns per tile")

    @property
    def key(self) -> tuple:
        return (self.family, self.block, self.warps, self.stages, self.split)

    def params(self) -> str:
        """'BLOCK 4096, 8 warps, 2 stages', with the family's own knob first."""
        rest = f"{self.warps} warps, {self.stages} stage{'s' * (self.stages > 1)}"
        if self.family == "algebraic":
            return f"tile {self.block}x{self.split}, {rest}"
        lead = {"split": f"{self.split} programs/row, ", "atomic": f"{self.split} programs/row, ",
                "persistent": f"{self.split} programs/SM, "}.get(self.family, "")
        return f"{lead}BLOCK {self.block}, {rest}"


def _kernel_ctx(plan: Plan, ops: list[Op], where: str, value: str) -> dict[str, Any]:
    """Kernel parameters, operand loads and op lines for `ops` applied to `value` ('v' or 'r')."""
    spec = _ops()
    used = sorted({op.operand for op in ops if op.operand is not None})
    params, loads, lines = [], [], []
    for i in used:
        o = plan.operands[i]
        if o.kind == "scalar":
            params.append(f"s{i}")
        else:
            params.append(f"p{i}_ptr")
            index = {"c": f"p{i}_ptr + c", "co": f"p{i}_ptr + co, mask=co_m, other=0.0"}[where]
            loads.append(f"o{i} = tl.load({f'p{i}_ptr' if o.kind == 'single' else index}).to(tl.float32)")
    for op in ops:
        if op.operand is None:
            expr = spec["unary"][op.name]["expr"].format(x=value)
        else:
            name = f"s{op.operand}" if plan.operands[op.operand].kind == "scalar" else f"o{op.operand}"
            expr = spec["binary"][op.name]["expr"].format(x=value, o=name)
        lines.append(f"{value} = {expr}")
    needs_c = where == "c" and any(plan.operands[i].kind == "channel" for i in used)
    return {"params": "".join(f", {p}" for p in params), "loads": loads, "ops": lines, "needs_c": needs_c, "used": used}


def _wrapper_args(plan: Plan, used: list[int]) -> str:
    return "".join(f", float(s{i})" if plan.operands[i].kind == "scalar" else f", p{i}" for i in used)


@functools.cache
def _env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("agent", "data/kernels"), undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )


def render(plan: Plan, variant: Variant, gpu: GPUSpec) -> str:
    """The complete ModelNew file for one variant."""
    fam = variant.family
    where = "co" if fam == "algebraic" else "c"  # per-channel operands: one value per row, or a vector over co
    pre, post = _kernel_ctx(plan, plan.pre, where, "v"), _kernel_ctx(plan, plan.post, where, "r")
    if fam == "split":  # the partial kernel applies the per-element ops, the combine kernel the per-row ones
        k, k2 = {**pre, "pre": pre["ops"], "post": []}, {**post, "pre": [], "post": post["ops"]}
    else:
        both = _kernel_ctx(plan, plan.pre + plan.post, where, "v")
        k = k2 = {**both, "pre": pre["ops"], "post": post["ops"]}
    every = range(len(plan.operands))
    w = {
        "params": "".join(f", s{i}" if plan.operands[i].kind == "scalar" else f", p{i}" for i in every),
        "prep": [f"p{i} = p{i}.reshape(-1).to(torch.float32).contiguous()"
                 for i in every if plan.operands[i].kind != "scalar"],
        "args": _wrapper_args(plan, k["used"]), "args2": _wrapper_args(plan, k2["used"]),
        "shape": ("N, Cout" if fam == "algebraic" else "N, C") + ", 1" * plan.out_ones,
        "doc": _wrapper_doc(plan, variant),
    }
    operand_exprs = "".join(f", {o.expr}" for o in plan.operands)
    if fam == "algebraic":
        call, producer = f"convt_gap(x, self.{plan.producer[0]}{operand_exprs})", []
        doc = (f"{plan.producer_kind} -> epilogue -> global average pool, in closed form: window sums of the input "
               "(Triton), contracted with the weight (Triton); the conv output is never materialised.")
    else:
        call, producer = f"gap(x{operand_exprs})", plan.producer
        doc = f"{plan.producer_kind} (PyTorch) -> epilogue + global average pool fused in Triton ({fam} reduction)."
    template = _env().get_template(TEMPLATES[fam])
    return template.render(plan=plan, v=variant, k=k, k2=k2, w=w, gpu=gpu, doc=doc, call=call, producer=producer)


def _wrapper_doc(plan: Plan, v: Variant) -> str:
    return {
        "row": "Mean over the spatial dims of x (N, C, ...), one program per (n, c) row, epilogue fused.",
        "split": f"Mean over the spatial dims of x (N, C, ...): {v.split} programs per (n, c) row, then a combine kernel.",
        "atomic": f"Mean over the spatial dims of x (N, C, ...): {v.split} programs per (n, c) row, tl.atomic_add.",
        "persistent": f"Mean over the spatial dims of x (N, C, ...): a persistent grid of {v.split} programs per SM.",
        "algebraic": f"Spatial mean of {plan.producer_kind}(x) with the epilogue, from window sums of x.",
    }[v.family]


# ---------------------------------------------------------------- reading the metrics


class Reading(_Model):
    """The figures of the current best's main kernel (the one with the most GPU time) that steer the search."""

    kernel: str = ""
    grid: float | None = None
    warps_pct: float | None = None
    dram_pct: float | None = None
    sm_pct: float | None = None
    duration_us: float | None = None

    @classmethod
    def of(cls, profile: Profile | None) -> Reading:
        if profile is None or not profile.kernels:
            return cls()
        k = max(profile.kernels.values(), key=lambda k: float(k.metrics.get(DURATION, 0.0) or 0.0))
        m = k.metrics
        grid = m.get(GRID)
        if grid is None and k.grid:
            grid = math.prod(k.grid)
        dur = m.get(DURATION)
        return cls(kernel=k.name, grid=grid, warps_pct=m.get(WARPS), dram_pct=m.get(DRAM), sm_pct=m.get(SM),
                   duration_us=dur / 1e3 if dur is not None else None)

    def figures(self, sms: int) -> str:
        """The metrics as the answer's first line cites them."""
        parts = []
        if self.grid is not None:
            rel = "<" if self.grid < SMALL_GRID_WAVES * sms else ">="
            parts.append(f"grid {self.grid:g} {rel} {SMALL_GRID_WAVES}×{sms} SMs")
        if self.warps_pct is not None:
            parts.append(f"warps active {self.warps_pct:.1f} %")
        if self.dram_pct is not None:
            parts.append(f"DRAM {self.dram_pct:.1f} %")
        if self.duration_us is not None:
            parts.append(f"{self.duration_us:.0f} µs")
        return ", ".join(parts) if parts else "no ncu metrics yet"


# ---------------------------------------------------------------- the proposer


class OfflineProposer:
    """Deterministic, metric-driven proposals for the GAP family (see the module docstring)."""

    name = "offline"

    def __init__(self, problem: ProblemSpec, gpu: GPUSpec) -> None:
        self.problem, self.gpu = problem, gpu
        self._plan: Plan | None = None
        self._unsupported: str | None = None
        self._emitted: dict[tuple, str] = {}  # variant key -> code, in proposal order
        self._by_code: dict[str, Variant] = {}
        self._failed: dict[str, int] = {}  # family -> failed candidates
        self._stage = "memory-fusion"
        self._code = ""
        self._profile: Profile | None = None

    # -- the loop's side

    def observe(self, stage: str, code: str, profile: Profile | None, results: list[EvalResult] | None) -> None:
        """The current best (code and metrics) and the last iteration's results, before each propose()."""
        self._stage, self._code, self._profile = stage, code or "", profile
        for r in results or []:
            v = self._by_code.get((r.code or "").strip())
            if v is not None and r.verdict != Verdict.CORRECT:
                self._failed[v.family] = self._failed.get(v.family, 0) + 1
                log.info("offline: %s variant %s failed (%s)", v.family, v.params(), r.verdict)

    def propose(self, prompt: str, k: int) -> list[Answer]:
        """k new variants (fewer when the space is spent or the problem is not of a known family)."""
        plan = self.plan()
        if plan is None:
            log.warning("offline proposer: %s", self._unsupported)
            return []
        answers = []
        for variant, why in self.ranked(plan):
            if len(answers) == k:
                break
            if variant.key in self._emitted:
                continue
            code = render(plan, variant, self.gpu)
            self._emitted[variant.key] = code
            self._by_code[code.strip()] = variant
            answers.append(Answer(text=f"{why}\n\n```python\n{code}```\n", model=MODEL, usage=Usage()))
        return answers

    def plan(self) -> Plan | None:
        if self._plan is None and self._unsupported is None:
            try:
                self._plan = recognise(self.problem)
            except Unsupported as e:
                self._unsupported = f"{self.problem.name} is not a family it can rewrite: {e}"
        return self._plan

    # -- choosing

    def current(self) -> Variant | None:
        """The current best, when it is one of ours."""
        return self._by_code.get(self._code.strip())

    def ranked(self, plan: Plan) -> list[tuple[Variant, str]]:
        """Every variant in the order to try it now, each with its one-line reason."""
        sms = self.gpu.sms
        reading = Reading.of(self._profile)
        figures = reading.figures(sms)
        current = self.current()
        out: list[tuple[Variant, str]] = []
        # The closed form in its own stage, and in any later stage once it is the current best.
        if plan.algebraic and (self._stage == "algebraic" or (current is not None and current.family == "algebraic")):
            mb_in, mb_mid = plan.in_bytes / 1e6, plan.mid_bytes / 1e6
            head = (f"{figures}: algebraic rewrite — the spatial mean of {plan.producer_kind}(x) is bias + "
                    f"sum W·(window sums of x) / (Hout·Wout): read x once ({mb_in:.0f} MB) instead of writing and "
                    f"reading the {mb_mid:.0f} MB conv output")
            anchor = current if current is not None and current.family == "algebraic" else None
            for v in _around("algebraic", anchor):
                out.append((v, f"{head} ({v.params()})" if anchor is None else
                            f"{figures}: tune the algebraic rewrite around the current best — {_change(anchor, v)}"))
        out += self._gap_order(plan, reading, figures, current)
        return out

    def _gap_order(self, plan: Plan, reading: Reading, figures: str, current: Variant | None) -> list[tuple[Variant, str]]:
        sms, rows = self.gpu.sms, plan.rows
        small = reading.grid is not None and reading.grid < SMALL_GRID_WAVES * sms
        starved = reading.warps_pct is not None and reading.warps_pct < LOW_WARPS_PCT
        near_peak = reading.dram_pct is not None and reading.dram_pct >= NEAR_PEAK_DRAM_PCT
        families = self._families(plan)
        split_s = _pow2_at_least(math.ceil(SPLIT_PROGRAMS_PER_SM * sms / max(rows, 1)))

        def reason(v: Variant) -> str:
            if v.family == "row":
                what = f"one program per (n, c) row ({rows} programs), flat contiguous loads, no div/mod"
            elif v.family in ("split", "atomic"):
                how = "partial sums + a combine kernel" if v.family == "split" else \
                    "tl.atomic_add into a zeroed fp32 output (no tl.store)"
                what = f"split each (n, c) row over {v.split} programs ({rows * v.split} programs), {how}"
            elif v.family == "persistent":
                what = f"persistent grid of {v.split}×{sms} SMs = {min(rows, v.split * sms)} programs looping over {rows} rows"
            else:
                what = v.family
            return f"{figures}: {what} ({v.params()})"

        tuning = near_peak or self._stage == "tuning" or not (small or starved)
        if current is not None and current.family in families and tuning:
            # Our own kernel, bandwidth-bound (or no profile): meta-parameter search around it, then other layouts.
            why = "near DRAM peak" if near_peak else "tuning stage" if self._stage == "tuning" else "grid and warps fine"
            order = [(v, f"{figures} ({why}): meta-parameter search around the current best — {_change(current, v)}")
                     for v in _around(current.family, current)]
            others = [f for f in families if f != current.family]
            order += [(v, reason(v)) for v in self._spread([_around(f, None) for f in others], others)]
            return order
        # The seed (or a latency-bound kernel of ours): restructure for more programs in flight.
        if rows >= SMALL_GRID_WAVES * sms:
            primary = ["row", "split", "persistent", "atomic"]
        else:
            primary = ["split", "atomic", "persistent", "row"]
        primary = sorted([f for f in primary if f in families], key=self._broken)
        anchors = {f: Variant(family=f, **{**ANCHORS[f], **({"split": split_s} if f in ("split", "atomic") else {})})
                   for f in primary}
        lists = [_around(f, anchors[f]) for f in primary]
        # the primary family gets two turns per round: the first batch already spans the layouts
        return [(v, reason(v)) for v in self._spread(lists, primary, double_first=True)]

    def _broken(self, family: str) -> bool:
        """A family whose candidates failed twice (compile errors, wrong results) is tried only after the rest."""
        return self._failed.get(family, 0) >= 2

    def _spread(self, lists: list[list[Variant]], families: list[str], double_first: bool = False) -> list[Variant]:
        """Round robin over the working families' lists, then the broken families' ones."""
        ok = [lst for lst, f in zip(lists, families) if not self._broken(f)]
        broken = [lst for lst, f in zip(lists, families) if self._broken(f)]
        if double_first and ok:
            ok = [ok[0], *ok[1:2], ok[0], *ok[2:]]
        return _interleave(ok) + _interleave(broken)

    def _families(self, plan: Plan) -> list[str]:
        """The GAP families this plan allows (atomics only where the epilogue is a pure scale)."""
        scale_only = all(op.operand is not None and _ops()["binary"][op.name]["scale"] for op in plan.post)
        return ["row", "split", "persistent"] + (["atomic"] if scale_only else [])


def _pow2_at_least(n: int, lo: int = 2, hi: int = 16) -> int:
    p = lo
    while p < n and p < hi:
        p *= 2
    return p


def _around(family: str, anchor: Variant | None) -> list[Variant]:
    """Every variant of a family, nearest the anchor first (index distance per meta-parameter; ties in a fixed
    order), so the search walks outwards from the current best."""
    space = SPACE[family]
    a = anchor.model_dump() if anchor is not None else {"family": family, **ANCHORS[family]}
    keys = ["block", "warps", "stages", "split"]

    def pos(k: str, value: int) -> float:
        vals = space[k]
        return vals.index(value) if value in vals else min(range(len(vals)), key=lambda i: abs(vals[i] - value))

    variants = [Variant(family=family, **dict(zip(keys, combo))) for combo in product(*(space[k] for k in keys))]

    def dist(v: Variant) -> tuple:
        d = [abs(pos(k, getattr(v, k)) - pos(k, a[k])) for k in keys]
        # split before block before warps before stages: what moves the most bytes in flight first
        return (sum(d), d[3] == 0, d[0] == 0, d[1] == 0, v.key)

    return sorted(variants, key=dist)


def _interleave(lists: list[list[Variant]]) -> list[Variant]:
    """Round robin over the lists (a list named twice gets two turns per round), skipping repeats."""
    seen: set[tuple] = set()
    out: list[Variant] = []
    iters = {id(lst): iter(lst) for lst in lists}
    live = list(lists)
    while live:
        for lst in list(live):
            v = next(iters[id(lst)], None)
            while v is not None and v.key in seen:
                v = next(iters[id(lst)], None)
            if v is None:
                live = [x for x in live if x is not lst]
                continue
            seen.add(v.key)
            out.append(v)
    return out


def _change(old: Variant, new: Variant) -> str:
    """'BLOCK 4096→8192 (8 warps, 2 stages)': what moved, then what stayed."""
    names = {"block": "BLOCK" if new.family != "algebraic" else "tile rows",
             "warps": "warps", "stages": "stages",
             "split": {"split": "programs/row", "atomic": "programs/row", "persistent": "programs/SM",
                       "algebraic": "tile cols", "row": "split"}[new.family]}
    moved = [f"{names[k]} {getattr(old, k)}→{getattr(new, k)}" for k in ("split", "block", "warps", "stages")
             if getattr(old, k) != getattr(new, k)]
    return (", ".join(moved) or "same") + f" ({new.params()})"
