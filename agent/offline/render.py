"""Rendering: one Variant of a Plan as a complete KernelBench-style ModelNew file, from the templates in
agent/data/kernels/*.py.j2 (jinja2 is imported on first use)."""

from __future__ import annotations

from agent.offline.kernelctx import env, kernel_ctx, wrapper_args
from agent.offline.models import Op, Operand, Plan, Variant
from agent.offline.tail import rows_call, with_rows_tail
from agent.schema import GPUSpec

TEMPLATES = {
    "row": "gap_row.py.j2",
    "split": "gap_split.py.j2",
    "atomic": "gap_split_atomic.py.j2",
    "persistent": "gap_persistent.py.j2",
    "algebraic": "convt2d_gap.py.j2",
    "nhwc": "gap_nhwc.py.j2",
    "fused": "conv2d_gap_fused.py.j2",
    "pool": "gap_window.py.j2",
    "pool_fused": "convt3d_window_gap.py.j2",
}


def render(plan: Plan, variant: Variant, gpu: GPUSpec) -> str:
    """The complete ModelNew file for one variant."""
    fam = variant.family
    if (plan.window is not None) != (fam in ("pool", "pool_fused")):
        raise ValueError(f"the {fam} family does not render a plan {'with' if plan.window else 'without'} a max-pool")
    if fam in ("nhwc", "fused", "pool_fused"):
        plan = bias_folded(plan)  # pool_fused: a per-channel constant commutes with the window's max and the mean
    # per-channel operands: per row, or a vector
    where = {"algebraic": "co", "nhwc": "cs", "fused": "cs", "pool_fused": "cs"}.get(fam, "c")
    pre, post = kernel_ctx(plan, plan.pre, where, "v"), kernel_ctx(plan, plan.post, where, "r")
    # partials, then a combine kernel
    two = fam in ("split", "fused", "pool", "pool_fused") or (fam == "nhwc" and variant.split > 1)
    if plan.window is not None:  # ops before the window's max and after it, both in the partial kernel
        both = kernel_ctx(plan, plan.pre + plan.pooled, where, "v")
        k = {**both, "pre": pre["ops"], "pooled": kernel_ctx(plan, plan.pooled, where, "v")["ops"], "post": []}
        k2 = {**post, "pre": [], "post": post["ops"]}
    elif two:
        # the partial kernel applies the per-element ops, the combine kernel the per-row ones
        k, k2 = {**pre, "pre": pre["ops"], "post": []}, {**post, "pre": [], "post": post["ops"]}
    else:
        both = kernel_ctx(plan, plan.pre + plan.post, where, "v")
        k = k2 = {**both, "pre": pre["ops"], "post": post["ops"]}
    every = range(len(plan.operands))
    w = {
        "params": "".join(f", s{i}" if plan.operands[i].kind == "scalar" else f", p{i}" for i in every),
        "prep": [f"p{i} = p{i}.reshape(-1).to(torch.float32).contiguous()"
                 for i in every if plan.operands[i].kind != "scalar"],
        "args": wrapper_args(plan, k["used"]), "args2": wrapper_args(plan, k2["used"]),
        "align": "".join(f", p{i}.data_ptr() % 16" for i in every if plan.operands[i].kind != "scalar"),
        "shape": ("N, Cout" if fam == "algebraic" else "N, C") + ", 1" * plan.out_ones,
        "doc": _wrapper_doc(plan, variant),
    }
    operand_exprs = "".join(f", {o.expr}" for o in plan.operands)
    conv_call = ""
    producer: list[str] = []  # module attributes forward() still calls before the Triton part
    if fam == "algebraic":
        call = f"convt_gap(x, self.{plan.producer[0]}, self.plans(){operand_exprs})"
        doc = (f"{plan.producer_kind} -> epilogue -> global average pool, in closed form and one launch: window sums "
               "of the input, contracted with the weight; the conv output is never materialised.")
    elif fam == "nhwc":
        call = f"gap(x, self.{plan.producer[0]}{operand_exprs})"
        conv_call = _conv_call(plan)
        doc = (f"{plan.producer_kind} (PyTorch, channels-last, without its bias) -> bias + epilogue + global average "
               f"pool fused in Triton "
               f"({'split reduction' if variant.split > 1 else 'two launches' if two else 'one launch'}).")
    elif fam == "pool_fused":
        call = f"gap(x, self.{plan.producer[0]}{operand_exprs})"
        doc = (f"{plan.producer_kind} computed in Triton window by window inside the max-pool, with the bias and the "
               "epilogue, and summed for the global average pool in the same kernel: neither the conv output nor the "
               "pooled tensor is written; a combine kernel after.")
    elif fam == "pool":
        call, producer = f"gap(x{operand_exprs})", plan.producer
        doc = (f"{plan.producer_kind} (PyTorch) -> epilogue, max-pool and global average pool fused in Triton (one "
               "pass over the conv output, the pooled tensor never written).")
    elif fam == "fused":
        call = f"gap(x, self.{plan.producer[0]}{operand_exprs})"
        doc = (f"{plan.producer_kind} computed in Triton (implicit GEMM, 3xTF32) with the bias, the epilogue and the "
               "global average pool in the same kernel: the conv output is never written; a combine kernel after.")
    else:
        call, producer = f"gap(x{operand_exprs})", plan.producer
        doc = f"{plan.producer_kind} (PyTorch) -> epilogue + global average pool fused in Triton ({fam} reduction)."
    if plan.rowwise is not None:  # a reduction over the channels after the pool: a second kernel (offline.tail)
        call = rows_call(plan, call)
    template = env().get_template(TEMPLATES[fam])
    code = template.render(plan=plan, v=variant, k=k, k2=k2, w=w, gpu=gpu, doc=doc, call=call, producer=producer,
                           conv_call=conv_call, two=two)
    return code if plan.rowwise is None else with_rows_tail(plan, code)


def bias_folded(plan: Plan) -> Plan:
    """The plan with the convolution's bias moved into the epilogue: an add of a per-channel operand before the other
    ops, after the mean where every per-element op is affine (mean(conv + b) = mean(conv) + b), else per element."""
    if not plan.conv_bias:
        return plan
    operands = [*plan.operands, Operand(kind="channel", expr=f"self.{plan.producer[0]}.bias")]
    add = Op(name="add", operand=len(operands) - 1)
    if plan.pre:
        return plan.model_copy(update={"operands": operands, "pre": [add, *plan.pre]})
    return plan.model_copy(update={"operands": operands, "post": [add, *plan.post]})


def _conv_call(plan: Plan) -> str:
    """The producer called without its bias, on the channels-last input xc and weight w."""
    assert plan.conv_fn is not None
    if plan.conv_fn.startswith("conv_transpose"):
        return (f"F.{plan.conv_fn}(xc, w, None, conv.stride, conv.padding, conv.output_padding, conv.groups, "
                "conv.dilation)")
    return f"F.{plan.conv_fn}(xc, w, None, conv.stride, conv.padding, conv.dilation, conv.groups)"


def _wrapper_doc(plan: Plan, v: Variant) -> str:
    return {
        "row": "Mean over the spatial dims of x (N, C, ...), one program per (n, c) row, epilogue fused.",
        "split": f"Mean over the spatial dims of x (N, C, ...): {v.split} programs per (n, c) row, then a combine kernel.",
        "atomic": f"Mean over the spatial dims of x (N, C, ...): {v.split} programs per (n, c) row, tl.atomic_add.",
        "persistent": f"Mean over the spatial dims of x (N, C, ...): a persistent grid of {v.split} programs per SM.",
        "algebraic": f"Spatial mean of {plan.producer_kind}(x) with the epilogue, from window sums of x.",
        "nhwc": f"{plan.producer_kind} in channels-last without its bias, then the mean over its positions with the "
                f"bias and the epilogue: {v.split} program(s) per (n, channel block)"
                + (", then a combine kernel." if v.split > 1 else ", one launch."),
        "fused": f"{plan.producer_kind}(x) with its bias and the epilogue, averaged over its positions without writing "
                 f"it: up to {v.split} programs per (n, channel block) over tiles of {v.block} positions, then a "
                 "combine kernel.",
        "pool": f"Mean over the max-pool windows of x (N, C, ...): {v.split} programs per (n, c) row, each window's "
                "maximum taken as it is read, then a combine kernel.",
        "pool_fused": f"{plan.producer_kind}(x) window by window inside the max-pool, each window's maximum summed "
                      f"for the mean: one program per (n, tile of {v.block} pooled positions), then a combine kernel.",
    }[v.family]
