"""Problem recognition: the problem's Model, traced with torch.fx on the meta device, read into a Plan (or
Unsupported, saying where it stopped). torch is imported inside the functions: importing this module is cheap.
Over 400 lines because `_walk` is (one pass over the fx graph, see its docstring); the rest are its small readers."""

from __future__ import annotations

import ast
import functools
import math
import textwrap
from typing import Any, Literal

from agent.offline.models import Op, Operand, Plan, RowTail, Unsupported
from agent.offline.ops import _function_table, _method_table, _module_table, _ops
from agent.schema import ProblemSpec


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


# The convolutions the channels-last variants call themselves (torch.nn.functional, without the bias): 2D and 3D,
# where a channels-last memory format exists.
_CONV_FUNCTIONS = {"Conv2d": "conv2d", "Conv3d": "conv3d", "ConvTranspose2d": "conv_transpose2d",
                   "ConvTranspose3d": "conv_transpose3d"}

_ARITH = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "pow": "**", "neg": "-"}


def _walk(gm, model, x) -> Plan:  # noqa: C901 (one pass over the graph, one branch per node kind)
    """The chain producer -> per-element ops -> [a max-pool of tiling windows -> per-element ops] -> means/pools ->
    per-row ops -> [a reduction over the channels -> per-batch-row ops] -> views (PyTorch, shape only), or
    Unsupported.

    Long (~230 lines) on purpose: one pass over the fx graph, one branch per node kind, all updating the same few
    pieces of state (layout, shapes, the op list); split into helpers, that state would travel through each."""
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
    end_shape: tuple[int, ...] | None = None  # what the Triton part returns (before the PyTorch views)
    reduction: str | None = None  # the tail's reduction over the channels (a key of ops.toml's [channel_reduce])
    pooled_shape: tuple[int, ...] | None = None  # the pooled value it reduces (what the GAP kernel returns)
    values_of: str | None = None  # torch.max/min with a dim just returned (values, indices)
    window: list[int] | None = None  # a max-pool before the mean (Plan.window)

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
            assert mid_shape is not None and nc is not None  # the producer, met first, set them
            shape = tuple(t.shape)
            rank = len(layout) if layout is not None else len(mid_shape)
            padded = (1,) * (rank - len(shape)) + shape
            lay = layout if layout is not None else [0, 1] + [2] * (rank - 2)
            chan = lay.index(1) if 1 in lay else None  # None: reduced over the channels already
            kind: Literal["single", "channel"]
            if t.numel() == 1:
                kind = "single"
            elif chan is not None and len(padded) == rank and padded[chan] == nc[1] and \
                    all(s == 1 for i, s in enumerate(padded) if i != chan):
                kind = "channel"
            else:
                what = "per-channel" if chan is not None else "one value (the channels are reduced by then)"
                raise Unsupported(f"operand self.{other.target} of shape {list(shape)} is not {what}")
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
            if node.args[0] is not cur or values_of:
                raise Unsupported("forward must return the chain's last value")
            break
        args = list(node.args)
        if cur not in args and cur not in node.kwargs.values():
            raise Unsupported(f"node {node.name} does not continue the chain")
        if values_of:  # torch.max/min over the channels: its values, and nothing else of it, go on
            if len(cur.users) != 1 or not _takes_values(node, cur):
                raise Unsupported(f"the indices of {values_of} over the channels are used")
            values_of, cur = None, node
            continue
        cat, name, pool_dims = "", "", 0
        size: tuple[Any, ...] = ()
        if node.op == "call_module":
            mod = gm.get_submodule(node.target)
            cat, name = modules.get(type(mod).__name__, ("", ""))
            if not cat and not ops and layout is None:
                producer.append(node.target)
                producer_kind = type(mod).__name__
                cur = node
                continue
            if cat == "pool":  # AdaptiveAvgPool2d(1): pools the last 2 dims
                size = tuple(mod.output_size) if isinstance(mod.output_size, (tuple, list)) else (mod.output_size,)
                pool_dims = int(type(mod).__name__[-2])
        elif node.op == "call_function":
            cat, name = functions.get(id(node.target), ("", ""))
            if cat == "pool":
                pool_dims = int(name[-2])
                wanted = node.kwargs.get("output_size", args[1] if len(args) > 1 else None)
                size = tuple(wanted) if isinstance(wanted, (tuple, list)) else (wanted,)
        elif node.op == "call_method":
            cat, name = methods.get(node.target, ("", ""))
        if cat == "clamp":  # clamp(x, lo, hi): clamp_min then clamp_max, each with a scalar bound
            pairs = _clamp_bounds(node, args, cur)
            cat, name = "binary", "clamp"
        if nc is None:
            s = _shape(cur)
            if not s or len(s) < 3:
                raise Unsupported(f"the pooled tensor must be N, C, spatial... (got {s})")
            nc, mid_shape = (s[0], s[1]), s
        if tail and cat != "reshape":  # views of the Triton part's output, and nothing computed from them
            raise Unsupported(f"{_what(node, name)} after {tail[-1].removeprefix('x = ')}: only views may follow a "
                              "reshape of the pooled value")
        if reduced() and cat == "reshape":
            end_shape = end_shape or _shape(cur)
            tail.append(torch_stmt(node))
            cur = node
            continue
        if reduced() and cat in ("reduce", "mean"):  # over the channels (the tail's), or over size-1 dims (a no-op)
            assert layout is not None
            label = name if cat == "reduce" else "mean"
            dims, keep = _reduce_dims(node, args, label)
            dims = sorted({d % len(layout) for d in dims})
            if any(layout[d] == 0 for d in dims):
                raise Unsupported(f"{label} over the batch dim after the pool")
            if any(layout[d] == 1 for d in dims):
                reduction, pooled_shape = label, _shape(cur)
                values_of = label if _ops()["channel_reduce"][label].get("indexed") else None
            layout = [(-1 if i in dims else d) for i, d in enumerate(layout)] if keep else \
                [d for i, d in enumerate(layout) if i not in dims]
            cur = node
            continue
        if reduced() and cat not in ("binary", "unary", "pool"):
            raise Unsupported(f"{_what(node, name)} after the pool: not an op the offline proposer can write in Triton")
        if not cat:
            raise Unsupported(f"{node.target} before the global average pool")
        if cat == "reduce":
            raise Unsupported(f"{name} before the global average pool")
        if cat in ("binary", "unary") and layout is not None and not reduced():
            raise Unsupported(f"{name} between partial reductions")
        if cat == "window":
            if layout is not None or window is not None or reduction:
                raise Unsupported(f"{_what(node, name)} after a mean or another max-pool")
            assert mid_shape is not None
            window = _window(node, args, gm, len(mid_shape) - 2, int(name[-2]))
            cur = node
            continue
        if cat in ("binary", "unary") and reduction and _shape(node) != _shape(cur):
            raise Unsupported(f"{name} broadcasts the value reduced over the channels to {_shape(node)}")
        phase = "final" if reduction else "post" if reduced() else "pooled" if window else "pre"
        if cat == "binary" and name == "clamp":
            ops.extend((phase, Op(name=op, operand=operand(bound))) for op, bound in pairs)
        elif cat == "binary":
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
                assert mid_shape is not None
                layout = [0, 1] + list(range(2, len(mid_shape)))
            dims = node.kwargs.get("dim", args[1] if len(args) > 1 else None)
            keep = node.kwargs.get("keepdim", args[2] if len(args) > 2 else False)
            if dims is None or node.kwargs.get("dtype") is not None:
                raise Unsupported("a mean over all dims (or with a dtype) is not a global average pool")
            dims = [dims] if isinstance(dims, int) else list(dims)
            layout = _reduce(layout, dims, keep)
        elif cat == "pool":
            if layout is None:
                assert mid_shape is not None
                layout = [0, 1] + list(range(2, len(mid_shape)))
            if any(s != 1 for s in size):
                raise Unsupported("an adaptive average pool to a size other than 1")
            layout = _reduce(layout, list(range(len(layout) - pool_dims, len(layout))), True)
        elif cat == "reshape":
            raise Unsupported(f"{name} before the global average pool")
        cur = node

    if not reduced():
        raise Unsupported("no global average pool over all spatial dims")
    end_shape = end_shape or _shape(cur)
    kernel_shape = pooled_shape if reduction else end_shape
    if not kernel_shape or tuple(kernel_shape[:2]) != nc or any(s != 1 for s in kernel_shape[2:]):
        raise Unsupported(f"the pooled value must be (N, C, 1, ...), not {kernel_shape}")

    rowwise = None
    if reduction:
        assert nc is not None
        if not end_shape or end_shape[0] != nc[0] or any(s != 1 for s in end_shape[1:]):
            raise Unsupported(f"the value reduced over the channels must be (N, 1, ...), not {end_shape}")
        rowwise = RowTail(reduce=reduction, ops=[op for phase, op in ops if phase == "final"],
                          out_ones=len(end_shape) - 1)

    binary = _ops()["binary"]
    pre = [op for phase, op in ops if phase == "pre"]
    pooled = [op for phase, op in ops if phase == "pooled"]
    post = [op for phase, op in ops if phase == "post"]
    # Affine ops commute with the mean: move the trailing ones of the last per-element list after the reduction
    # (those before a window's max stay: a max does not commute with a negative scale).
    last = pooled if window else pre
    cut = max((i + 1 for i, op in enumerate(last) if not binary.get(op.name, {}).get("affine", False)), default=0)
    last, post = last[:cut], last[cut:] + post
    pre, pooled = (pre, last) if window else (last, pooled)

    conv = gm.get_submodule(producer[0]) if len(producer) == 1 else None
    algebraic = (
        conv is not None and type(conv).__name__ in _ops()["algebraic"]["modules"] and not pre and window is None
        and getattr(conv, "groups", 0) == 1 and getattr(conv, "padding_mode", "") == "zeros" and x.dim() == 4
    )
    conv_fn = None
    if conv is not None and type(conv).__name__ in _CONV_FUNCTIONS and getattr(conv, "padding_mode", "") == "zeros":
        conv_fn = _CONV_FUNCTIONS[type(conv).__name__]
    conv_k = None
    if conv is not None and conv_fn == "conv2d" and getattr(conv, "groups", 0) == 1 and x.dim() == 4 and window is None:
        conv_k = math.prod(conv.weight.shape[1:])
    window_fused = (
        window is not None and conv is not None and type(conv).__name__ == "ConvTranspose3d" and x.dim() == 5
        and getattr(conv, "groups", 0) == 1 and getattr(conv, "padding_mode", "") == "zeros"
        and all(d == 1 for d in conv.dilation) and not any(conv.output_padding)
        and len({*conv.kernel_size}) == len({*conv.stride}) == len({*conv.padding}) == len({*window}) == 1
        and window[0] % conv.stride[0] == 0
    )
    itemsize = torch.empty((), dtype=x.dtype, device="meta").element_size()
    assert mid_shape is not None and nc is not None
    return Plan(
        init_source="", producer=producer, producer_kind=producer_kind, pre=pre, post=post, operands=operands,
        window=window, pooled=pooled, window_fused=window_fused, rowwise=rowwise, tail=tail,
        out_ones=len(kernel_shape) - 2, batch=nc[0], channels=nc[1],
        length=math.prod(mid_shape[2:]),
        in_bytes=x.numel() * itemsize, mid_bytes=math.prod(mid_shape) * itemsize, algebraic=algebraic,
        conv_fn=conv_fn, conv_bias=conv_fn is not None and getattr(conv, "bias", None) is not None, conv_k=conv_k,
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


def _window(node, args: list, gm, spatial: int, dims: int) -> list[int]:
    """A max-pool's window per spatial dim, where it tiles them: stride = window, no padding, dilation 1, floor."""
    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        k, stride, pad, dil = mod.kernel_size, mod.stride, mod.padding, mod.dilation
        ceil, indices = mod.ceil_mode, mod.return_indices
    else:
        names = ["kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"]
        given = {**dict(zip(names, args[1:])), **node.kwargs}
        k, stride, pad = given.get("kernel_size"), given.get("stride"), given.get("padding", 0)
        dil, ceil, indices = given.get("dilation", 1), given.get("ceil_mode", False), given.get("return_indices", False)

    def per_dim(v) -> list:
        return list(v) if isinstance(v, (tuple, list)) else [v] * dims

    if dims != spatial:
        raise Unsupported(f"a {dims}D max-pool of a tensor with {spatial} spatial dims")
    window = per_dim(k)
    if stride in (None, [], ()):
        stride = window
    if not all(isinstance(v, int) for v in window + per_dim(stride) + per_dim(pad) + per_dim(dil)):
        raise Unsupported("a max-pool whose window, stride, padding or dilation is not a number")
    if per_dim(stride) != window or any(per_dim(pad)) or any(d != 1 for d in per_dim(dil)) or ceil or indices:
        raise Unsupported("a max-pool other than non-overlapping windows (stride = window, no padding, dilation 1, "
                          "floor, no indices)")
    return window


def _clamp_bounds(node, args: list, cur) -> list[tuple[str, Any]]:
    """torch.clamp(x, min, max) / x.clamp(min, max) as [(clamp_min, lo), (clamp_max, hi)] (a None bound left out)."""
    given = {**dict(zip(["min", "max"], args[1:])), **node.kwargs}
    if args[0] is not cur or len(args) > 3 or set(node.kwargs) - {"min", "max"}:
        raise Unsupported(f"clamp with arguments {args[1:]} {node.kwargs}")
    pairs = [(op, given.get(key)) for op, key in (("clamp_min", "min"), ("clamp_max", "max"))]
    if any(b is not None and (isinstance(b, bool) or not isinstance(b, (int, float))) for _, b in pairs):
        raise Unsupported(f"clamp with bounds that are not numbers: {given}")
    return [(op, b) for op, b in pairs if b is not None]


def _reduce_dims(node, args: list, label: str) -> tuple[list[int], bool]:
    """The dims and keepdim of a reduction after the pool (sum, mean, logsumexp, amax, max, ...)."""
    dims = node.kwargs.get("dim", args[1] if len(args) > 1 else None)
    keep = node.kwargs.get("keepdim", args[2] if len(args) > 2 else False)
    extra = sorted(set(node.kwargs) - {"dim", "keepdim"})
    if dims is None:
        raise Unsupported(f"{label} over every dim after the pool (the batch dim too)")
    if extra or hasattr(dims, "op") or not isinstance(keep, bool) or len(args) > 3:
        raise Unsupported(f"{label} after the pool with arguments {args[1:]} {node.kwargs}")
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not all(isinstance(d, int) for d in dims):
        raise Unsupported(f"{label} after the pool over dims {dims}")
    return dims, keep


def _takes_values(node, of) -> bool:
    """node is `of[0]` or `of.values`: the values of torch.max/min's (values, indices)."""
    import operator

    return node.op == "call_function" and (
        (node.target is operator.getitem and node.args == (of, 0))
        or (node.target is getattr and node.args == (of, "values")))


def _what(node, name: str) -> str:
    """How a message names the op of a node: its table name, else its module, method or function."""
    if name:
        return name
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    return str(node.target)
