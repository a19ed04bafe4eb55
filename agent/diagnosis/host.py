"""The two clocks: a call whose latency is well above its GPU time is host-bound (launches, allocations, glue).
The verdict is agent.hostbound's, the one --stage auto and the [TIMING] block use; this adds what it suggests."""

from __future__ import annotations

from agent.diagnosis.model import DiagnosisInput, Finding
from agent.hostbound import host_bound
from agent.plural import count


def analyze(d: DiagnosisInput) -> list[Finding]:
    t = d.timing
    if host_bound(t) is None:
        return []
    assert t is not None and t.latency_ms is not None and t.device_ms is not None  # host_bound checked them
    gap_us = (t.latency_ms - t.device_ms) * 1e3
    launches = f", {count(t.launches, 'launch', 'launches')} per call" if t.launches is not None else ""
    several = t.launches is not None and t.launches > 1
    return [Finding(
        kind="host-bound", kernel="",
        evidence=f"a call takes {t.latency_ms:.3f} ms, its GPU work {t.device_ms:.3f} ms{launches}",
        figures={"latency_ms": t.latency_ms, "device_ms": t.device_ms, "host_gap_us": round(gap_us, 1)}
        | ({"launches": float(t.launches)} if t.launches is not None else {}),
        remedy="fewer-launches" if several else None,
        direction="fewer launches and less host work per call" if several else "less host work per call",
        gain_pct=round(100 * gap_us / 1e3 / t.latency_ms, 1))]
