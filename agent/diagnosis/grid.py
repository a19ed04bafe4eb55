"""Programs against SMs: a grid smaller than the SM count leaves SMs idle; a last partial wave leaves a tail."""

from __future__ import annotations

import math

from agent.diagnosis.model import DiagnosisInput, Finding
from agent.ncu.metadata import GRID

# A grid of at least this many waves has a tail too small to matter (its last wave is a small share of the time).
MANY_WAVES = 8


def analyze(d: DiagnosisInput) -> list[Finding]:
    out = []
    for k in d.kernels():
        grid, sms = k.metrics.get(GRID), d.sms(k)
        if not isinstance(grid, (int, float)) or not sms:
            continue
        grid = int(grid)
        if grid < sms:
            idle = sms - grid
            out.append(Finding(
                kind="small-grid", kernel=k.name,
                evidence=f"grid {grid} programs on {sms} SMs: {idle} SMs ({100 * idle / sms:.0f} %) idle",
                figures={"grid": grid, "sms": sms, "idle_sms": idle}, remedy="more-programs",
                direction="split the work over at least one program per SM (a split reduction, smaller tiles)",
                gain_pct=round(100 * idle / sms, 1)))
            continue
        waves = grid / sms  # one program per SM per wave: a lower bound on the waves where several fit
        if waves < MANY_WAVES and not math.isclose(waves, round(waves)) and waves % 1 < 0.5:
            full, tail = math.floor(waves), waves % 1
            out.append(Finding(
                kind="tail", kernel=k.name,
                evidence=f"grid {grid} programs on {sms} SMs: {full} full wave{'s' if full != 1 else ''} and a last one "
                         f"{100 * tail:.0f} % full",
                figures={"grid": grid, "sms": sms, "waves": round(waves, 2)}, remedy="more-programs",
                direction="a grid of whole waves (or many more programs) so the last wave is not mostly idle",
                gain_pct=round(100 * (1 - tail) / (full + 1), 1)))
    return out
