"""The stage ladder of --stage auto: stay on a stage while it improves; once it stalls, follow the bottleneck its
best measures (agent.hostbound.bottleneck) to the stage that addresses it."""

from __future__ import annotations

from typing import Protocol

from agent.hostbound import bottleneck
from agent.ncu.metadata import meta
from agent.schema import Objective, Profile, Timing
from agent.stages import load_stages


class Measured(Protocol):
    """What the ladder reads of the current best (agent.loop.Best)."""

    profile: Profile | None
    timing: Timing | None


NEXT_FOR = {  # what a converged stage's bottleneck calls for next, with why
    "latency-bound": ("parallelism", "too few warps in flight to hide memory latency"),
    "launch-bound": ("tuning", "kernels so short that launch and meta-parameters dominate"),
    "memory-bound": ("memory-access", "bandwidth-bound: make every byte count"),
    "compute-bound": ("algebraic", "arithmetic-bound: eliminate work"),
    "host-bound": ("host-overhead", "the GPU waits for Python: fewer launches and less host work per call"),
}


FLOOR = "correctness"  # the ladder's floor: no stage rule beyond the harness's own


def choose_stage(current: str, visited: set[str], best: Measured | None, stale: int, patience: int,
                 objective: Objective = "latency") -> tuple[str | None, str]:
    """Next stage for --stage auto: stay while a stage improves; once it stalls, follow the bottleneck (host-bound,
    from the two clocks, first when the run optimizes latency)."""
    if best is None:
        return FLOOR, "no correct kernel yet"
    if current != FLOOR and stale < patience:
        return current, f"improving on {current}" if stale == 0 else f"{stale}/{patience} iterations without gain"
    b = bottleneck(best.profile, best.timing, objective)
    open_stages = [s.name for s in load_stages() if s.name not in visited and s.name != FLOOR
                   and (s.entered_for is None or (b is not None and b.kind == s.entered_for))]
    if not open_stages:
        return None, f"stage ladder exhausted (last: {current})"
    if b is None:
        return open_stages[0], f"{current} stalled; no profile to classify, next on the ladder"
    wanted, why = NEXT_FOR.get(b.kind, (open_stages[0], "unclassified"))
    if b.kind == "memory-bound" and b.figures.get("dram_pct", 0.0) >= meta().bottleneck.near_peak_dram_pct:
        wanted, why = "algebraic", f"DRAM at {b.figures['dram_pct']:.0f} % of peak: only moving fewer bytes helps"
    if wanted not in open_stages:
        wanted, why = open_stages[0], f"{why}, but {wanted} is done: next on the ladder"
    return wanted, f"{b.reason}: {why}"  # the reason starts with the kind and its figures
