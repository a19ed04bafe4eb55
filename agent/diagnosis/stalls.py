"""Warp stall reasons (full metric set): where the cycles between two issued instructions go, the top two."""

from __future__ import annotations

from agent.diagnosis.model import STALL_REASONS, DiagnosisInput, Finding, Remedy, stall_metric
from agent.ncu.metadata import DRAM, meta

# Below this many cycles between issues a warp is rarely stalled: nothing to report.
BUSY_CYCLES = 2.0
MEMORY_WAITS = ("long_scoreboard", "lg_throttle")
WHAT: dict[str, tuple[str, Remedy | None, str]] = {
    "long_scoreboard": ("waiting on global or local memory", "more-bytes-in-flight",
                        "more independent loads in flight (more programs, loads issued before they are used)"),
    "short_scoreboard": ("waiting on shared memory or special math", None, "fewer shared-memory round trips"),
    "barrier": ("waiting at a barrier", None, "less work between barriers, or fewer of them"),
    "mio_throttle": ("the memory instruction queue is full", None, "fewer, wider memory instructions"),
    "lg_throttle": ("the local/global queue is full", "more-bytes-in-flight", "wider (vectorized) loads, fewer of them"),
    "math_pipe_throttle": ("a math pipe is saturated", None, "spread the arithmetic over other pipes, or do less of it"),
}


def analyze(d: DiagnosisInput) -> list[Finding]:
    out = []
    for k in d.kernels()[:1]:
        ratios = {r: float(v) for r in STALL_REASONS
                  if isinstance(v := k.metrics.get(stall_metric(r)), (int, float)) and r != "selected"}
        if not ratios:
            continue
        total = sum(ratios.values()) + float(k.metrics.get(stall_metric("selected"), 1.0) or 1.0)
        if total < BUSY_CYCLES:
            continue
        top = sorted(ratios.items(), key=lambda x: x[1], reverse=True)[:2]
        first, cycles = top[0]
        dram = k.metrics.get(DRAM)
        if first in MEMORY_WAITS and isinstance(dram, (int, float)) and dram >= meta().bottleneck.near_peak_dram_pct:
            continue  # at DRAM peak, warps waiting on memory is the expected state, not a problem to fix
        what, remedy, direction = WHAT.get(first, (first.replace("_", " "), None, "see ncu's warp state statistics"))
        second = f", then {top[1][0]} {100 * top[1][1] / total:.0f} %" if len(top) > 1 and top[1][1] > 0 else ""
        out.append(Finding(
            kind="stalls", kernel=k.name,
            evidence=f"{total:.1f} cycles between issues per warp: {first} {100 * cycles / total:.0f} % ({what})"
                     f"{second}",
            figures={"cycles_between_issues": round(total, 2), f"{first}_pct": round(100 * cycles / total, 1)},
            remedy=remedy, direction=direction))
    return out
