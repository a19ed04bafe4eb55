"""What the kernel templates are rendered with (agent.offline.render for a family's file, agent.offline.tail for the
rows tail): the jinja2 environment over agent/data/kernels (imported on first use), a kernel's operand parameters,
loads and op lines, and the wrapper's arguments."""

from __future__ import annotations

import functools
from typing import Any

from agent.offline.models import Op, Plan
from agent.offline.ops import _ops


def kernel_ctx(plan: Plan, ops: list[Op], where: str, value: str) -> dict[str, Any]:
    """Kernel parameters, operand loads and op lines for `ops` applied to `value` ('v' or 'r'). `where` says how a
    per-channel operand is indexed: one value per row ('c'), a vector over co ('co'), or over the channel block cs
    of a channels-last tile ('cs': broadcast along the tile's positions for 'v')."""
    spec = _ops()
    used = sorted({op.operand for op in ops if op.operand is not None})
    params, loads, lines = [], [], []
    for i in used:
        o = plan.operands[i]
        if o.kind == "scalar":
            params.append(f"s{i}")
        else:
            params.append(f"p{i}_ptr")
            index = {"c": f"p{i}_ptr + c", "co": f"p{i}_ptr + co, mask=co_m, other=0.0",
                     "cs": f"p{i}_ptr + cs, mask=cm, other=0.0"}[where]
            loads.append(f"o{i} = tl.load({f'p{i}_ptr' if o.kind == 'single' else index}).to(tl.float32)")
    for op in ops:
        if op.operand is None:
            expr = spec["unary"][op.name]["expr"].format(x=value)
        else:
            kind = plan.operands[op.operand].kind
            name = f"s{op.operand}" if kind == "scalar" else f"o{op.operand}"
            name += "[None, :]" if where == "cs" and value == "v" and kind == "channel" else ""
            expr = spec["binary"][op.name]["expr"].format(x=value, o=name)
        lines.append(f"{value} = {expr}")
    needs_c = where == "c" and any(plan.operands[i].kind == "channel" for i in used)
    return {"params": "".join(f", {p}" for p in params), "loads": loads, "ops": lines, "needs_c": needs_c, "used": used}


def wrapper_args(plan: Plan, used: list[int]) -> str:
    return "".join(f", float(s{i})" if plan.operands[i].kind == "scalar" else f", p{i}" for i in used)


@functools.cache
def env() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("agent", "data/kernels"), undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )
