"""Launch-heavy forwards: one kernel launched many times per forward (a Python loop over rows) pays the host's launch
cost each time and gives the GPU one small grid after another. The count is the harness's (Triton launches per
forward) where a timing is known, else the profile's: ncu profiles a sample of each kernel's launches
(agent.profiler.PROFILED_LAUNCHES), so a full sample says "at least". The host time between launches is the latency
clock's time not spent in the kernels; without a timing the gain is estimated from a launch's typical host cost
(metrics.toml's launch_us) against the kernels' mean duration."""

from __future__ import annotations

from agent.diagnosis.model import DiagnosisInput, Finding
from agent.ncu.metadata import DURATION, meta
from agent.plural import count

MANY_LAUNCHES = 8  # launches of one kernel in one forward: a loop the grid should have been


def analyze(d: DiagnosisInput) -> list[Finding]:
    ks = [k for k in d.profile.kernels.values() if isinstance(k.metrics.get(DURATION), (int, float))]
    if not ks:
        return []
    k = max(ks, key=lambda x: x.launches)
    t = d.timing if d.timing is not None and d.timing.meaningful else None
    per_forward = t.launches if t is not None and t.launches is not None else None
    launches = per_forward if per_forward is not None else k.launches
    if launches < MANY_LAUNCHES or k.launches < 2:
        return []
    mean_us = float(k.metrics[DURATION]) / k.launches / 1e3
    sampled = f" (ncu profiled {k.launches})" if k.launches < launches else ""
    at_least = "" if per_forward is not None else "at least "
    figures = {"launches": float(launches), "mean_us": round(mean_us, 2), "profiled_launches": float(k.launches)}
    if t is not None and t.latency_ms is not None:
        gap_us = max(0.0, (t.latency_ms * 1e3 - launches * mean_us) / launches)
        host = (f"; the host spends {gap_us:.1f} µs between them (a call takes {t.latency_ms:.3f} ms, its GPU work "
                f"{t.device_ms:.3f} ms)" if t.device_ms is not None else f"; {gap_us:.1f} µs between them")
        figures["host_gap_us"] = round(gap_us, 2)
        gain = 100 * gap_us / (gap_us + mean_us)
    else:
        host = f"; a launch costs the host about {meta().bottleneck.launch_us:g} µs"
        gain = 100 * meta().bottleneck.launch_us / (meta().bottleneck.launch_us + mean_us)
    return [Finding(
        kind="launch-bound", kernel=k.name,
        evidence=f"a forward makes {at_least}{count(launches, 'launch', 'launches')} of {k.name}{sampled}, "
                 f"{mean_us:.1f} µs each on the GPU{host}",
        figures=figures, remedy="fewer-launches",
        direction="fuse them into one launch: a grid over what the launches loop over (one program per row)",
        gain_pct=round(gain, 1))]
