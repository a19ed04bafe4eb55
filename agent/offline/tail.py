"""The tail after the pool when it reduces over the channels (Plan.rowwise: conv -> mean -> + bias -> logsumexp over
the channels -> * 10): a second, tiny Triton kernel, one program per batch row, from the pooled N x C values that the
family's kernel writes (its `post` ops applied) to the tensor forward returns. Every family's file gets the same
one, from agent/data/kernels/_rows_tail.j2, and ModelNew.forward calls it on the family's result."""

from __future__ import annotations

from agent.offline.kernelctx import env, kernel_ctx, wrapper_args
from agent.offline.models import Plan
from agent.offline.ops import _ops

_CLASS = "\nclass ModelNew("


def rows_call(plan: Plan, call: str) -> str:
    """`call` (the family's `gap(x, ...)`) wrapped in the tail: `rows_tail(gap(x, self.bias), 10.0)`."""
    assert plan.rowwise is not None
    used = sorted({op.operand for op in plan.rowwise.ops if op.operand is not None})
    return f"rows_tail({call}{''.join(f', {plan.operands[i].expr}' for i in used)})"


def with_rows_tail(plan: Plan, code: str) -> str:
    """The family's rendered file with the tail's kernel and wrapper put before class ModelNew."""
    tail = plan.rowwise
    assert tail is not None
    spec = _ops()["channel_reduce"][tail.reduce]
    t = kernel_ctx(plan, tail.ops, "c", "r")  # per-row operands: scalars or single values, never per channel
    described = " then ".join([f"{tail.reduce} over the channels"] + [op.name for op in tail.ops])
    source = env().get_template("_rows_tail.j2").render(
        t=t, fill=spec["fill"], reduce=spec["lines"], out_ones=tail.out_ones,
        params="".join(f", s{i}" if plan.operands[i].kind == "scalar" else f", p{i}" for i in t["used"]),
        prep=[f"p{i} = p{i}.reshape(-1).to(torch.float32).contiguous()"
              for i in t["used"] if plan.operands[i].kind != "scalar"],
        args=wrapper_args(plan, t["used"]),
        doc=f"The pooled (N, C, ...) values y, {described}: one program per batch row.",
    )
    head, sep, rest = code.partition(_CLASS)
    assert sep, "every family's file defines class ModelNew (agent/data/kernels/_common.j2)"
    return f"{head}{source}\n{sep}{rest}"
