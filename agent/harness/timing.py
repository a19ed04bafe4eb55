"""Timing inside a worker: GPU (CUDA events, an L2 flush that reads, a synchronized wall-clock cross-check)
and CPU mode (a few wall-clock calls, not meaningful). Imported only by worker processes."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from agent.harness.job import BenchStats
from agent.harness.settings import TimingSettings


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo, hi = int(pos), min(int(pos) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _spread_pct(xs: list[float]) -> float:
    med = statistics.median(xs)
    return 100.0 * (_quantile(xs, 0.8) - _quantile(xs, 0.2)) / med if med > 0 else 0.0


def bench_gpu(fn: Callable[[], object], cfg: TimingSettings) -> BenchStats:
    """Median of CUDA-event times with an L2 flush (a READ of flush_mb) before each repetition.

    Why a read: do_bench's flush zeroes a buffer and leaves dirty lines the timed kernel must write back
    (measured: 188.5 vs 178.9 us for a plain GAP kernel). The wall-clock pass synchronizes the whole device
    after each call, so work on other streams or still running after return shows up there; when it exceeds
    the events by more than wall_factor/wall_slack, the wall-clock time is reported instead.
    """
    import torch

    flush = torch.ones(cfg.flush_mb * (1 << 20) // 4, dtype=torch.float32, device="cuda")

    def flush_l2() -> None:
        flush.sum()

    for _ in range(max(1, cfg.warmup_calls)):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    est_ms = max((time.perf_counter() - t0) * 1000 / 3, 1e-3)
    reps = int(min(cfg.max_reps, max(cfg.min_reps, cfg.target_ms / est_ms)))

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        flush_l2()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]

    walls = []
    for _ in range(min(cfg.wall_reps, reps)):
        flush_l2()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) * 1000)
    del flush

    median, wall = statistics.median(times), statistics.median(walls)
    stats = BenchStats(median_ms=median, spread_pct=_spread_pct(times), wall_ms=wall, repeats=reps)
    if wall > cfg.wall_factor * median + cfg.wall_slack_ms:
        stats.note = (
            f"synchronized wall-clock {wall:.3f} ms per call vs CUDA events {median:.3f} ms: work outside the "
            "timed stream or after return; reporting wall-clock"
        )
        stats.median_ms, stats.spread_pct = wall, _spread_pct(walls)
    return stats


def bench_cpu(fn: Callable[[], object], cfg: TimingSettings) -> BenchStats:
    """CPU mode: a few wall-clock calls (interpreter timings say nothing about the GPU)."""
    times = []
    for _ in range(max(1, cfg.cpu_reps)):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    med = statistics.median(times)
    return BenchStats(median_ms=med, spread_pct=_spread_pct(times), wall_ms=med, repeats=len(times),
                      note="CPU mode (TRITON_INTERPRET=1): not meaningful")
