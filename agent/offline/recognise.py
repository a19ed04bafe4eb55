"""Problem recognition: the problem's Model, traced with torch.fx on the meta device, read into a Plan (or
Unsupported, saying where it stopped). torch is imported inside the functions: importing this module is cheap."""

from __future__ import annotations

import ast
import functools
import math
import textwrap
from typing import Any, Literal

from agent.offline.models import Op, Operand, Plan, Unsupported
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
    """The chain producer -> per-element ops -> means/pools -> per-row ops -> PyTorch tail, or Unsupported.

    Long (~190 lines) on purpose: one pass over the fx graph, one branch per node kind, all updating the same few
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
    kernel_shape: tuple[int, ...] | None = None  # what the Triton part returns (before the PyTorch tail)
    channel_lse: bool | None = None  # the tail starts with a logsumexp over the channels (keepdim or not)

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
            chan = (layout if layout is not None else [0, 1] + [2] * (rank - 2)).index(1)
            kind: Literal["single", "channel"]
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
        if nc is None:
            s = _shape(cur)
            if not s or len(s) < 3:
                raise Unsupported(f"the pooled tensor must be N, C, spatial... (got {s})")
            nc, mid_shape = (s[0], s[1]), s
        if reduced() and cat not in ("binary", "unary", "mean", "pool"):
            kernel_shape = _shape(cur)
            if not tail:
                channel_lse = _channel_logsumexp(node, len(kernel_shape or ()))
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
    conv_fn = None
    if conv is not None and type(conv).__name__ in _CONV_FUNCTIONS and getattr(conv, "padding_mode", "") == "zeros":
        conv_fn = _CONV_FUNCTIONS[type(conv).__name__]
    itemsize = torch.empty((), dtype=x.dtype, device="meta").element_size()
    assert mid_shape is not None and nc is not None
    return Plan(
        init_source="", producer=producer, producer_kind=producer_kind, pre=pre, post=post, operands=operands,
        tail=tail, out_ones=len(kernel_shape) - 2, batch=nc[0], channels=nc[1], length=math.prod(mid_shape[2:]),
        in_bytes=x.numel() * itemsize, mid_bytes=math.prod(mid_shape) * itemsize, algebraic=algebraic,
        conv_fn=conv_fn, conv_bias=conv_fn is not None and getattr(conv, "bias", None) is not None,
        channel_lse=channel_lse,
    )


def _channel_logsumexp(node, rank: int) -> bool | None:
    """keepdim, where the node is torch.logsumexp over dim 1 (the channels) of the pooled value; None otherwise."""
    import torch

    if node.op != "call_function" or node.target is not torch.logsumexp or rank < 2:
        return None
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
    keep = node.kwargs.get("keepdim", node.args[2] if len(node.args) > 2 else False)
    dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    return bool(keep) if len(dims) == 1 and isinstance(dims[0], int) and dims[0] % rank == 1 else None


def _reduce(layout: list[int], dims: list[int], keep: bool) -> list[int]:
    """The layout after a mean over `dims` (spatial or already-reduced size-1 dims only)."""
    rank = len(layout)
    dims = sorted({d % rank for d in dims})
    if any(layout[d] in (0, 1) for d in dims):
        raise Unsupported("the mean reduces the batch or channel dim")
    if keep:
        return [(-1 if i in dims else d) for i, d in enumerate(layout)]
    return [d for i, d in enumerate(layout) if i not in dims]
