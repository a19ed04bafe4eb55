"""DRAM throughput against peak. Near peak there is nothing to fix in the access pattern: no alarm, only 'fewer
bytes' helps; well below it (with enough programs), too few bytes are in flight."""

from __future__ import annotations

from agent.diagnosis.model import DiagnosisInput, Finding
from agent.ncu.metadata import DRAM, SM, meta


def analyze(d: DiagnosisInput) -> list[Finding]:
    t = meta().bottleneck
    out = []
    for k in d.kernels()[:1]:  # the kernel with the most GPU time
        dram, sm = k.metrics.get(DRAM), k.metrics.get(SM)
        if not isinstance(dram, (int, float)):
            continue
        peak = d.gpu.memory_bandwidth_gbs if d.gpu else None
        achieved = f" (~{dram / 100 * peak:.0f} of {peak:.0f} GB/s)" if peak else ""
        figures = {"dram_pct": float(dram)} | ({"peak_gbs": peak} if peak else {})
        if dram >= t.near_peak_dram_pct:
            out.append(Finding(
                kind="at-dram-peak", kernel=k.name, evidence=f"DRAM at {dram:.1f} % of peak{achieved}",
                figures=figures, remedy="fewer-bytes",
                direction="the access pattern is not the limit: only moving fewer bytes makes it faster"))
        elif dram >= (sm if isinstance(sm, (int, float)) else 0.0):
            out.append(Finding(
                kind="low-dram", kernel=k.name, evidence=f"DRAM at {dram:.1f} % of peak{achieved}",
                figures=figures, remedy="more-bytes-in-flight",
                direction="more loads in flight: more programs, wider (vectorized, contiguous) loads",
                gain_pct=round(100 * (1 - dram / t.near_peak_dram_pct), 1)))
    return out
