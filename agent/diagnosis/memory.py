"""DRAM and L2 throughput against peak. Near DRAM peak there is nothing to fix in the access pattern: no alarm, only
'fewer bytes' helps; well below it (with enough programs), too few bytes are in flight. L2 busier than DRAM and the
SMs, and well used, means data is re-read through L2 (a working set fetched again by neighbouring programs, or
loads that miss L1 every time) rather than streamed once from DRAM."""

from __future__ import annotations

from agent.diagnosis.model import L2, DiagnosisInput, Finding
from agent.ncu.metadata import DRAM, SM, meta


def analyze(d: DiagnosisInput) -> list[Finding]:
    t = meta().bottleneck
    out = []
    for k in d.kernels()[:1]:  # the kernel with the most GPU time
        dram, sm, l2 = k.metrics.get(DRAM), k.metrics.get(SM), k.metrics.get(L2)
        busy_l2 = []  # at DRAM peak, DRAM is the limit whatever L2 does
        if isinstance(l2, (int, float)) and not (isinstance(dram, (int, float)) and dram >= t.near_peak_dram_pct):
            busy_l2 = _l2(k.name, float(l2), {"DRAM": dram, "SM": sm})
        out += busy_l2
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
        elif dram >= (sm if isinstance(sm, (int, float)) else 0.0) and not busy_l2:  # loads hit L2: not too few
            out.append(Finding(
                kind="low-dram", kernel=k.name, evidence=f"DRAM at {dram:.1f} % of peak{achieved}",
                figures=figures, remedy="more-bytes-in-flight",
                direction="more loads in flight: more programs, wider (vectorized, contiguous) loads",
                gain_pct=round(100 * (1 - dram / t.near_peak_dram_pct), 1)))
    return out


def _l2(kernel: str, l2: float, units: dict[str, object]) -> list[Finding]:
    """L2 as the busiest unit, and well used (ncu's 60 %). At its roof the time is L2's: were the re-reads gone, the
    next busiest unit would set it (time taken as proportional to the busiest unit's load), hence the gain; below its
    roof the finding points at the traffic without claiming a number."""
    t = meta().bottleneck
    others = {name: float(v) for name, v in units.items() if isinstance(v, (int, float))}
    if l2 < t.bound_pct or (others and l2 <= max(others.values())):
        return []
    vs = ", ".join(f"{name} {v:.0f} %" for name, v in others.items())
    gain = round(100 * (1 - max(others.values()) / l2), 1) if others and l2 >= t.near_roof_pct else None
    return [Finding(
        kind="l2-bound", kernel=kernel,
        evidence=f"L2 at {l2:.1f} % of its peak, the busiest unit{f' ({vs})' if vs else ''}: data is re-read "
                 f"through L2 rather than streamed once from DRAM",
        figures={"l2_pct": round(l2, 1)} | {f"{name.lower()}_pct": round(v, 1) for name, v in others.items()},
        remedy="fewer-bytes",
        direction="reuse what each program loads (keep its tile in registers or shared memory, read each input "
                  "once) instead of fetching it again through L2",
        gain_pct=gain)]
