"""Warps in flight against the warp slots: too few cannot hide memory latency."""

from __future__ import annotations

from agent.diagnosis.model import DiagnosisInput, Finding
from agent.ncu.metadata import WARPS, meta


def analyze(d: DiagnosisInput) -> list[Finding]:
    low = meta().bottleneck.low_warps_pct
    out = []
    for k in d.kernels()[:1]:
        warps = k.metrics.get(WARPS)
        if isinstance(warps, (int, float)) and warps < low:
            block = f", {k.block[0]} threads per program" if k.block else ""
            out.append(Finding(
                kind="low-occupancy", kernel=k.name,
                evidence=f"warps active {warps:.1f} % of the slots (under {low:g} %){block}",
                figures={"warps_active_pct": float(warps)}, remedy="more-programs",
                direction="more warps per SM: more programs, more warps per program, fewer registers"))
    return out
