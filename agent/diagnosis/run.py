"""Every analyzer over one input, findings ranked: the agent's own (they carry the numbers a remedy needs) by
estimated gain, then ncu's rules that say something the agent's did not."""

from __future__ import annotations

from collections.abc import Callable

from agent.diagnosis import access, balance, grid, host, library, memory, occupancy, roofline, rules, spills, stalls
from agent.diagnosis.model import DiagnosisInput, Finding
from agent.schema import Profile, Timing

ANALYZERS: dict[str, Callable[[DiagnosisInput], list[Finding]]] = {
    "grid": grid.analyze,
    "balance": balance.analyze,
    "memory": memory.analyze,
    "occupancy": occupancy.analyze,
    "host": host.analyze,
    "library": library.analyze,
    "stalls": stalls.analyze,
    "spills": spills.analyze,
    "access": access.analyze,
    "roofline": roofline.analyze,
    "rules": rules.analyze,
}


EXPLAINS_IMBALANCE = ("small-grid", "tail")
# Where a kernel sits on the roofline bounds what all the causes together can gain; it names none of them, so it comes
# after every cause the agent found (and before ncu's rules), whatever its gain.
BOUNDS = ("memory-bound", "compute-bound")


def diagnose(d: DiagnosisInput, limit: int | None = None) -> list[Finding]:
    """All findings, most valuable first (the agent's causes by estimated gain, then its roofline bounds, then ncu's),
    at most `limit`."""
    found = [f for analyze in ANALYZERS.values() for f in analyze(d)]
    # a measured effect whose cause another finding names is shown once, as the cause (uneven SMs from a small grid)
    explained = {f.kernel for f in found if f.kind in EXPLAINS_IMBALANCE}
    found = [f for f in found if not (f.kind == "imbalance" and f.kernel in explained)]
    found.sort(key=lambda f: (f.source != "agent", f.kind in BOUNDS, -(f.gain_pct or 0.0)))
    return found[:limit] if limit is not None else found


PROMPT_FINDINGS = 4  # a prompt's [DIAGNOSIS] block: the few most valuable findings, not all of them


def for_prompt(profile: Profile | None, timing: Timing | None, limit: int | None = PROMPT_FINDINGS) -> list[Finding]:
    """The findings about the current best (a prompt shows the first `limit`), judged on the GPU its profile was
    recorded on (not the prompt's target: the numbers are that GPU's); none without a profile or a GPU timing."""
    from agent.catalog import closest_gpu

    if profile is None and (timing is None or not timing.meaningful):
        return []
    gpu = closest_gpu(profile.gpu) if profile is not None and profile.gpu else None
    return diagnose(DiagnosisInput(profile=profile or Profile(), gpu=gpu, timing=timing), limit=limit)
