"""Every analyzer over one input, findings ranked by agent.diagnosis.graph: root causes (with the symptoms they
explain) by their one gain, then the kernel's place on the roofline, then ncu's rules."""

from __future__ import annotations

from collections.abc import Callable

from agent.diagnosis import (
    access,
    balance,
    fusion,
    grid,
    host,
    issue,
    launches,
    library,
    memory,
    occupancy,
    roofline,
    rules,
    spills,
    stalls,
)
from agent.diagnosis.graph import rank
from agent.diagnosis.model import DiagnosisInput, Finding
from agent.schema import Profile, Timing

ANALYZERS: dict[str, Callable[[DiagnosisInput], list[Finding]]] = {
    "grid": grid.analyze,
    "balance": balance.analyze,
    "memory": memory.analyze,
    "occupancy": occupancy.analyze,
    "host": host.analyze,
    "launches": launches.analyze,
    "fusion": fusion.analyze,
    "issue": issue.analyze,
    "library": library.analyze,
    "stalls": stalls.analyze,
    "spills": spills.analyze,
    "access": access.analyze,
    "roofline": roofline.analyze,
    "rules": rules.analyze,
}


def diagnose(d: DiagnosisInput, limit: int | None = None) -> list[Finding]:
    """All findings, root causes first (agent.diagnosis.graph: each with the symptoms it explains folded under it,
    ranked by its one gain), then where the kernel sits on the roofline, then ncu's rules; at most `limit`."""
    found = rank([f for analyze in ANALYZERS.values() for f in analyze(d)])
    return found[:limit] if limit is not None else found


PROMPT_FINDINGS = 5  # a prompt's [DIAGNOSIS] block: the root causes first, not every finding


def for_prompt(profile: Profile | None, timing: Timing | None, limit: int | None = PROMPT_FINDINGS) -> list[Finding]:
    """The findings about the current best (a prompt shows the first `limit`), judged on the GPU its profile was
    recorded on (not the prompt's target: the numbers are that GPU's); none without a profile or a GPU timing."""
    from agent.catalog import closest_gpu

    if profile is None and (timing is None or not timing.meaningful):
        return []
    gpu = closest_gpu(profile.gpu) if profile is not None and profile.gpu else None
    return diagnose(DiagnosisInput(profile=profile or Profile(), gpu=gpu, timing=timing), limit=limit)
