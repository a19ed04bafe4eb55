"""Host-bound, from the two clocks (agent.hostbound): the thresholds live in metrics.toml."""

from __future__ import annotations

from agent.hostbound import bottleneck, host_bound
from agent.ncu.metadata import meta
from agent.schema import Bottleneck, Profile, Timing


def timing(device: float, latency: float, meaningful: bool = True, launches: int | None = 2) -> Timing:
    return Timing(candidate_ms=latency, candidate_spread_pct=1.0, device_ms=device, latency_ms=latency, host_ms=0.09,
                  launches=launches, repeats=100, meaningful=meaningful, objective="latency")


def test_a_call_well_over_its_gpu_time_is_host_bound_with_its_figures():
    b = host_bound(timing(0.047, 0.12))
    assert b is not None and b.kind == "host-bound"
    assert b.figures == {"latency_ms": 0.12, "device_ms": 0.047, "host_us": 90.0, "launches": 2.0}
    assert b.reason == "host-bound: 0.120 ms per call vs 0.047 ms on the GPU (2.6x; 90 us to issue the call, 2 kernel launches)"


def test_both_thresholds_must_be_passed():
    th = meta().bottleneck
    assert host_bound(timing(1.39, 1.40)) is None  # a GPU-bound kernel: latency is its GPU time plus a launch
    assert host_bound(timing(0.002, 0.002 * th.host_factor + 0.001)) is None  # 1.5x, but only a few microseconds
    assert host_bound(timing(0.1, 0.1 * (th.host_factor - 0.01))) is None  # far in microseconds, but under 1.5x


def test_cpu_mode_or_missing_clocks_say_nothing():
    assert host_bound(timing(0.05, 0.2, meaningful=False)) is None
    assert host_bound(None) is None


def test_on_the_latency_clock_host_bound_comes_before_ncus_verdict():
    prof = Profile(bottleneck=Bottleneck(kind="memory-bound", reason="memory-bound: DRAM 88 %"))
    assert bottleneck(prof, timing(0.047, 0.12), "latency").kind == "host-bound"
    assert bottleneck(prof, timing(0.047, 0.12), "device").kind == "memory-bound"
    assert bottleneck(prof, timing(1.39, 1.40), "latency").kind == "memory-bound"
    assert bottleneck(None, None, "latency") is None
