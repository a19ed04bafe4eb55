"""Programs against SMs: a grid smaller than the SM count leaves SMs idle; a last partial wave leaves a tail.

Waves are ncu's own count (launch__waves_per_multiprocessor: an SM holds several programs at once, as many as its
registers, shared memory and warp slots allow). Without it no tail is claimed: grid / SMs would count one program
per SM and call a tail what runs in a single wave (seen on an H100: 152 programs, "1.15 waves", ran as one wave,
16 to an SM, the busiest SM active 1.03x the average). Nor
where DRAM runs at its peak: the programs of a partial last wave share the bandwidth the full ones did, so the
memory system stays busy (seen on an H100: the memory-fusion best, 1.29 waves, 88.6 % of DRAM peak)."""

from __future__ import annotations

import math

from agent.diagnosis.model import SM_ACTIVE_AVG, SM_ACTIVE_MAX, WAVES, DiagnosisInput, Finding
from agent.ncu.metadata import DRAM, GRID, SM, meta

# A grid of at least this many waves has a tail too small to matter (its last wave is a small share of the time).
MANY_WAVES = 8


def _bounded(model_pct: float, k_metrics: dict, *, tail: bool = False) -> float:
    """A model's estimate, never more than the share of the GPU that measurably sat idle (100 - the busier of SM and
    DRAM throughput): on an H100 a grid of 1.01 waves "should" waste half the time, yet its SMs ran at 92 %. A tail's
    cost is also no more than the time the average SM waited for the busiest (sm__cycles_active, where counted): on an
    H200 an issue-heavy grid of 1.29 waves "should" waste 35 %, yet its last wave kept every SM busy (max 1.03x avg)."""
    busy = [float(v) for v in (k_metrics.get(SM), k_metrics.get(DRAM)) if isinstance(v, (int, float))]
    bound = min(model_pct, 100 - max(busy)) if busy else model_pct
    avg, most = k_metrics.get(SM_ACTIVE_AVG), k_metrics.get(SM_ACTIVE_MAX)
    if tail and isinstance(avg, (int, float)) and isinstance(most, (int, float)) and most > 0:
        bound = min(bound, 100 * (1 - float(avg) / float(most)))
    return round(bound, 1)


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
                gain_pct=_bounded(100 * idle / sms, k.metrics)))
            continue
        waves, dram = k.metrics.get(WAVES), k.metrics.get(DRAM)
        if not isinstance(waves, (int, float)):
            continue
        if isinstance(dram, (int, float)) and dram >= meta().bottleneck.near_peak_dram_pct:
            continue
        waves = float(waves)
        if 1 <= waves < MANY_WAVES and not math.isclose(waves, round(waves)) and waves % 1 < 0.5:
            full, tail = math.floor(waves), waves % 1
            out.append(Finding(
                kind="tail", kernel=k.name,
                evidence=f"grid {grid} programs on {sms} SMs: {waves:.2f} waves, the last one {100 * tail:.0f} % full",
                figures={"grid": grid, "sms": sms, "waves": round(waves, 2)}, remedy="more-programs",
                direction="a grid of whole waves (or many more programs) so the last wave is not mostly idle",
                gain_pct=_bounded(100 * (1 - tail) / (full + 1), k.metrics, tail=True)))
    return out
