"""Profiles as evidence: the stage's metric set and prompt table, diffs with directions, bottleneck classification."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from agent.ncu.metadata import (
    BLOCK,
    DRAM,
    DURATION,
    GRID,
    SM,
    SM_COUNT,
    WARPS,
    longest_kernel,
    meta,
    metric_info,
)
from agent.schema import Bottleneck, GPUSpec, KernelProfile, Number, Profile, Stage

Direction = Literal["better", "worse", "same", "neutral"]


def stage_metric_set(stage: Stage) -> list[str]:
    """The metrics `ncu --metrics` collects for a stage: its prompt metrics, then the duration, the launch size
    and whatever else classify() needs that the stage doesn't already ask for (in that order, no repeats)."""
    names = list(stage.metrics)
    for extra in (DURATION, GRID, BLOCK, DRAM, SM, WARPS):
        if extra not in names:
            names.append(extra)
    return names


# ---------------------------------------------------------------- diff


class MetricDelta(BaseModel):
    """One metric of one kernel, before and after: `direction` says whether the change is for the better."""

    model_config = ConfigDict(extra="forbid")
    kernel: str
    metric: str
    before: Number | None
    after: Number | None
    delta: float | None
    pct: float | None
    direction: Direction


def _pairs(a: Profile, b: Profile) -> list[tuple[str, KernelProfile | None, KernelProfile | None]]:
    """Kernels paired by name; those left over on both sides paired in order (a renamed kernel still diffs)."""
    pairs: list[tuple[str, KernelProfile | None, KernelProfile | None]] = []
    for name, ka in a.kernels.items():
        if name in b.kernels:
            pairs.append((name, ka, b.kernels[name]))
    left_a = [k for n, k in a.kernels.items() if n not in b.kernels]
    left_b = [k for n, k in b.kernels.items() if n not in a.kernels]
    for ka, kb in zip(left_a, left_b):
        pairs.append((f"{ka.name} → {kb.name}", ka, kb))
    n = min(len(left_a), len(left_b))
    pairs += [(k.name, k, None) for k in left_a[n:]] + [(k.name, None, k) for k in left_b[n:]]
    return pairs


def diff(a: Profile, b: Profile) -> list[MetricDelta]:
    """Per kernel and metric, before (a) and after (b): delta, percent change and whether it is better.

    Kernels pair by name; kernels found on one side only pair up in order (so a candidate that renamed its one
    kernel still diffs against its parent). A metric on one side only has None for the other. "same" means a
    change under metrics.toml's same_pct; "neutral" a change in a metric with no better direction.
    """
    same_pct = meta().bottleneck.same_pct
    out: list[MetricDelta] = []
    for label, ka, kb in _pairs(a, b):
        ma, mb = (ka.metrics if ka else {}), (kb.metrics if kb else {})
        for metric in dict.fromkeys([*ma, *mb]):
            before, after = ma.get(metric), mb.get(metric)
            if before is None or after is None:
                out.append(MetricDelta(kernel=label, metric=metric, before=before, after=after, delta=None,
                                       pct=None, direction="neutral"))
                continue
            delta = float(after) - float(before)
            pct = delta / abs(before) * 100 if before else (0.0 if delta == 0 else None)
            if (pct is not None and abs(pct) < same_pct) or delta == 0:
                direction: Direction = "same"
            else:
                way = metric_info(metric).direction
                if way == "neutral":
                    direction = "neutral"
                else:
                    direction = "better" if (delta > 0) == (way == "higher") else "worse"
            out.append(MetricDelta(kernel=label, metric=metric, before=before, after=after, delta=delta, pct=pct,
                                   direction=direction))
    return out


# ---------------------------------------------------------------- classify


def _num(metrics: dict[str, Number], name: str) -> float | None:
    v = metrics.get(name)
    return float(v) if isinstance(v, (int, float)) else None


def classify(profile_or_kernel: Profile | KernelProfile, gpu: GPUSpec | None = None, *, sms: int | None = None) -> Bottleneck:
    """Memory-, compute-, latency- or launch-bound, with the figures that led to it.

    A Profile is judged by its kernel with the most GPU time. Rules, in order (thresholds in metrics.toml):
    launch-bound when one launch runs under `launch_us`; memory- / compute-bound when DRAM / SM throughput
    reaches `bound_pct` of peak (the higher one names it); otherwise latency-bound (ncu's SpeedOfLight rule:
    neither throughput near peak means latency is the limit), with the reasons it shows (a grid smaller than
    the SM count, few warps active). The SM count comes from `gpu`, else `sms`, else the report's own
    launch__sm_count when the kernel's metrics hold it.
    """
    t = meta().bottleneck
    if isinstance(profile_or_kernel, Profile):
        if not profile_or_kernel.kernels:
            return Bottleneck(kind="unknown", reason="no kernels profiled")
        kernel = longest_kernel(profile_or_kernel)
        assert kernel is not None
        prefix = f"{kernel.name}: " if len(profile_or_kernel.kernels) > 1 else ""
    else:
        kernel, prefix = profile_or_kernel, ""
    m = kernel.metrics
    n_sms = gpu.sms if gpu else sms or next((int(v) for n in SM_COUNT if (v := _num(m, n))), None)
    dur, dram, sm, warps, grid = (_num(m, n) for n in (DURATION, DRAM, SM, WARPS, GRID))
    figures = {k: v for k, v in {
        "duration_us": dur / 1e3 if dur is not None else None, "launches": float(kernel.launches),
        "dram_pct": dram, "sm_pct": sm, "warps_active_pct": warps, "grid": grid,
        "sms": float(n_sms) if n_sms else None,
    }.items() if v is not None}

    parts = []
    if grid is not None:
        parts.append(f"grid {grid:g} blocks" + (f" on {n_sms} SMs" if n_sms else ""))
    if dram is not None:
        parts.append(f"DRAM {dram:.1f} %")
    if sm is not None:
        parts.append(f"SM {sm:.1f} %")
    if warps is not None:
        parts.append(f"warps active {warps:.1f} %")
    details = ", ".join(parts)

    per_launch_us = dur / 1e3 / max(kernel.launches, 1) if dur is not None else None
    kind: Literal["memory-bound", "compute-bound", "latency-bound", "launch-bound"]
    if per_launch_us is not None and per_launch_us < t.launch_us:
        kind = "launch-bound"
        reason = f"{per_launch_us:.1f} µs per launch (< {t.launch_us:g} µs: launch overhead dominates)"
        reason += f", {details}" if details else ""
    elif dram is None and sm is None:
        return Bottleneck(kind="unknown", reason=prefix + "unknown: the profile has neither DRAM nor SM throughput",
                          figures=figures)
    elif max(dram or 0.0, sm or 0.0) >= t.bound_pct:
        kind = "memory-bound" if (dram or 0.0) >= (sm or 0.0) else "compute-bound"
        reason = details
    else:
        kind = "latency-bound"
        why = [f"neither DRAM nor SM throughput reaches {t.bound_pct:g} %"]
        if grid is not None and n_sms and grid < n_sms:
            why.append("fewer blocks than SMs")
        if warps is not None and warps < t.low_warps_pct:
            why.append(f"under {t.low_warps_pct:g} % of warp slots active")
        reason = f"{details} ({'; '.join(why)})"
    return Bottleneck(kind=kind, reason=f"{prefix}{kind}: {reason}", figures=figures)
