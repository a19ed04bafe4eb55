"""Host-bound: what the two clocks say that ncu cannot. ncu times kernels; a forward whose call latency its GPU time
cannot explain spends the rest issuing work from Python (launches, allocations, PyTorch glue around the kernels).
"""

from __future__ import annotations

from agent.ncu.metadata import meta
from agent.schema import Bottleneck, Objective, Profile, Timing


def host_bound(timing: Timing | None) -> Bottleneck | None:
    """A host-bound Bottleneck with its figures, or None (no GPU timing, or the call is about its GPU time)."""
    if timing is None or not timing.meaningful or timing.device_ms is None or timing.latency_ms is None:
        return None
    th = meta().bottleneck
    device, latency = timing.device_ms, timing.latency_ms
    if latency < th.host_factor * device or (latency - device) * 1000 < th.host_gap_us:
        return None
    host_us = (timing.host_ms if timing.host_ms is not None else latency - device) * 1000
    launches = f", {timing.launches} kernel launch{'es' if timing.launches != 1 else ''}" if timing.launches else ""
    figures = {"latency_ms": latency, "device_ms": device, "host_us": host_us}
    if timing.launches is not None:
        figures["launches"] = float(timing.launches)
    return Bottleneck(kind="host-bound", figures=figures,
                      reason=f"host-bound: {latency:.3f} ms per call vs {device:.3f} ms on the GPU "
                             f"({latency / device:.1f}x; {host_us:.0f} us to issue the call{launches})")


def bottleneck(profile: Profile | None, timing: Timing | None, objective: Objective) -> Bottleneck | None:
    """What limits the current best on the run's clock: host-bound (on the latency clock) before ncu's verdict."""
    if objective == "latency":
        host = host_bound(timing)
        if host is not None:
            return host
    return profile.bottleneck if profile else None
