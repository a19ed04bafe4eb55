"""Every analyzer over one input, findings ranked: the agent's own (they carry the numbers a remedy needs) by
estimated gain, then ncu's rules that say something the agent's did not."""

from __future__ import annotations

from collections.abc import Callable

from agent.diagnosis import grid, host, memory, occupancy, rules
from agent.diagnosis.model import DiagnosisInput, Finding

ANALYZERS: dict[str, Callable[[DiagnosisInput], list[Finding]]] = {
    "grid": grid.analyze,
    "memory": memory.analyze,
    "occupancy": occupancy.analyze,
    "host": host.analyze,
    "rules": rules.analyze,
}


def diagnose(d: DiagnosisInput, limit: int | None = None) -> list[Finding]:
    """All findings, most valuable first (agent findings by estimated gain, then ncu's), at most `limit`."""
    found = [f for analyze in ANALYZERS.values() for f in analyze(d)]
    found.sort(key=lambda f: (f.source != "agent", -(f.gain_pct or 0.0)))
    return found[:limit] if limit is not None else found
