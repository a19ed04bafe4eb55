"""Timing inside a worker, out of the timed code's reach.

Before every timed call the input buffers get new content (drawn on the device: the same buffers, never the same
values), so no result memoised by buffer, version counter, call count or content survives; at the positions the
parent chose (TimingPlan) the content is one the reference knows, and those outputs come back to be checked. The
candidate cannot tell which: every call's content is new and drawn from the same distribution.

GPU, two clocks, each after an L2 flush that READS flush_mb before each call (do_bench's zeroing flush leaves dirty
lines the timed kernel must write back: measured 188.5 vs 178.9 us for a plain GAP kernel):
- device: CUDA events around calls queued back to back (the GPU's time; the host runs ahead);
- latency: one call from an idle GPU, synchronized, host dispatch included (what a caller of forward waits), with
  the host's share (until forward returns) on the side; samples spread over a window (host time drifts). A latency that host and device time cannot explain is work
  the events did not see (other streams, work after return): the device clock then reports the latency.
- energy (Bench.energy): NVML's energy counter around blocks of calls queued back to back, each call after a refill
  of its inputs but with no flush and no head start, so the figure is the call's own (plus the refill's, the same for
  every candidate and baseline) at its full rate: a host-bound call's idle gaps between kernels count, as they do in
  a stream of such calls. Per call: the block's energy / its calls; the median of a few blocks, their spread beside it.
  The counter advances in steps of tens of ms: blocks start on a step, end on the next step after the GPU finished
  (less the idle energy since), and last at least ten steps.
CPU mode: a few wall-clock calls, marked not meaningful; every one of them is checked; no energy.

A checked call of the candidate's is also traced (agent.harness.worker.trace), and the parent applies the run-time rules to
it as to a validation call: a forward that does the stage's work in Triton while validated and in PyTorch once timed
(it can count its calls) is refused. On the GPU a traced call's time is left out of the clocks (tracing copies
every buffer a launch is given); the candidate cannot tell which calls those are, as it cannot tell which are checked.
The energy loop's checked calls are traced too, through the same path as the device clock's (a forward that could
tell the energy loop apart would otherwise cheat on energy alone); a block's energy then includes one traced call's
copies: the candidate's cost, never its gain (energy_checked_calls of several hundred calls or more per block).

Everything the loop calls (events, synchronize, the flush's sum, the fill, the energy counter) is a reference taken
before the candidate was imported (agent.harness.worker.trusted).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from agent.harness.worker.inputs import flatten, own_attributes, refill
from agent.harness.job import BenchStats, TimingPlan
from agent.harness.settings import TimingSettings


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo, hi = int(pos), min(int(pos) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def spread_pct(xs: list[float]) -> float:
    med = statistics.median(xs)
    return 100.0 * (_quantile(xs, 0.8) - _quantile(xs, 0.2)) / med if med > 0 else 0.0


def sample_indices(positions: list[float], reps: int) -> list[int]:
    """Distinct call indices for the plan's positions (a collision moves to the next free index)."""
    taken: list[int] = []
    for p in positions:
        i = min(reps - 1, max(0, round(p * (reps - 1))))
        while i in taken and len(taken) < reps:
            i = (i + 1) % reps
        taken.append(i)
    return taken


def device_reps(cfg: TimingSettings, call_ms: float) -> int:
    """Calls timed on the device clock for a call of about `call_ms`: about target_ms of them, within bounds."""
    return int(min(cfg.max_reps, max(cfg.min_reps, cfg.target_ms / max(call_ms, 1e-3))))


def latency_reps(cfg: TimingSettings, call_ms: float) -> int:
    """Calls timed on the latency clock: spread over about latency_window_ms, within bounds."""
    return int(min(cfg.latency_max_reps, max(cfg.min_reps, cfg.latency_window_ms / max(call_ms, 1e-3))))


class Bench:
    """Times `call()` (the forward on `buffers`) as the module doc says; `outputs` holds the sampled outputs."""

    def __init__(self, call: Callable[[], Any], buffers: list[Any], plan: TimingPlan | None, cfg: TimingSettings,
                 trusted: Any, tracker: Any = None) -> None:
        self.call, self.buffers, self.cfg, self.t, self.tracker = call, buffers, cfg, trusted, tracker
        self.plan = plan or TimingPlan(pool_seeds=[], positions=[], fresh_seed=0)
        self.outputs: list[list[Any]] = []
        # per traced call: (launches, every output given to a launch, its Trace, the output shapes)
        self.traces: list[tuple[int, bool, Any, list[list[int]]]] = []
        self.launch_counts: list[int] = []
        self._fresh = 0

    def _fill(self, seed: int | None = None) -> None:
        own_attributes("input", self.buffers)  # before the harness reads them (inputs.own_attributes)
        if seed is None:
            self._fresh += 1
            seed = self.plan.fresh_seed * 1_000_003 + self._fresh
        refill(self.buffers, seed, self.t.device, self.t.normal_, self.t.generator)

    def _begin(self) -> None:
        if self.tracker is not None:
            self.tracker.begin(False, [], count_only=True)  # a counter, not bookkeeping: host time is timed too

    def _call(self, checked: bool) -> Any:
        """One forward; a checked one (the candidate's, not a baseline's) under the tracker's full recording."""
        if self.tracker is None or not checked:
            self._begin()
            return self.call()
        self.tracker.begin(True, self.buffers)
        with self.tracker.dispatch_mode():
            return self.call()

    def _traced(self, checked: bool) -> bool:
        return self.tracker is not None and checked

    def _recorded(self, out: Any, keep: bool) -> tuple[int, bool, Any, list[list[int]]] | None:
        """Count the call's launches; a checked call's trace (None for the others)."""
        if self.tracker is None:
            return None
        self.launch_counts.append(self.tracker.launches)
        if not keep:
            return None
        own_attributes("output", list(out) if type(out) in (tuple, list) else [out])
        tensors = flatten(out)[1]
        launched, trace = self.tracker.end(tensors)
        return self.tracker.launches, launched, trace, [list(o.shape) for o in tensors]

    def _end(self, out: Any, keep: bool) -> None:
        recorded = self._recorded(out, keep)
        if recorded is not None:
            self.traces.append(recorded)
        if keep:
            self.outputs.append([self.t.to(self.t.clone(o), "cpu") for o in flatten(out)[1]])

    def _stats(self, times: list[float], samples: list[int], note: str) -> BenchStats:
        return BenchStats(
            median_ms=statistics.median(times), spread_pct=spread_pct(times), repeats=len(times), note=note,
            launches_min=min(self.launch_counts) if self.launch_counts else None,
            launches_max=max(self.launch_counts) if self.launch_counts else None, sampled=samples,
        )

    def gpu(self) -> BenchStats:
        """Both clocks, then energy: each loop one call below this one, so that every call of the forward has the
        same frames above it (a forward that probes its stack, e.g. by recursing to the limit, cannot tell them).
        The candidate's finalizers run between its calls only (Trusted.collector_off): each call's output is let go once
        it is read, and what the call left collected, before the next call's inputs are drawn."""
        cfg = self.cfg
        with self.t.collector_off():
            stats = self._clocks()
            self.energy(stats, base=len(self.plan.positions) + len(self.plan.latency_positions))
        honest = cfg.wall_factor * (stats.median_ms + (stats.host_ms or 0.0)) + cfg.wall_slack_ms
        latency, spread = stats.latency_ms, stats.latency_spread_pct
        if latency is not None and spread is not None and latency > honest:
            stats.note = (f"a synchronized call takes {latency:.3f} ms but its host dispatch "
                          f"({stats.host_ms:.3f} ms) and CUDA events ({stats.median_ms:.3f} ms) account for less: work "
                          "outside the timed stream or after return; the device clock reports the call's latency")
            stats.median_ms, stats.spread_pct = latency, spread
        return stats

    def _clocks(self) -> BenchStats:
        t, cfg = self.t, self.cfg
        flush = self.t.ones(cfg.flush_mb * (1 << 20) // 4, device="cuda")

        def flush_l2() -> None:
            t.sum(flush)

        # every call goes through _call, whichever loop it is in: the same frames above the forward (a forward must
        # not tell a loop, or a checked call, by its callers)
        for _ in range(max(1, cfg.warmup_calls)):
            self._fill()
            self._call(False)
        t.sync()
        probe = []
        for _ in range(3):
            self._fill()
            t.sync()
            t0 = t.perf_counter()
            self._call(False)
            t.sync()
            probe.append((t.perf_counter() - t0) * 1000)
        est_ms = max(statistics.median(probe), 1e-3)
        reps = device_reps(cfg, est_ms)
        n = len(self.plan.positions)

        # the latency clock: one call from an idle GPU, synchronized; checked on inputs of its own. Samples span about
        # latency_window_ms: a host-bound call's dispatch time drifts over hundreds of ms (H100: 0.09-0.18 ms between
        # blocks of 100 calls in one process), so a short burst would report whichever state it fell in.
        lat_reps = latency_reps(cfg, est_ms)
        lat_at = dict(zip(sample_indices(self.plan.latency_positions, lat_reps),
                          range(n, n + len(self.plan.latency_positions))))
        walls, hosts = [], []
        for i in range(lat_reps):
            self._fill(self.plan.pool_seeds[lat_at[i]] if i in lat_at else None)
            flush_l2()
            t.sync()
            t0 = t.perf_counter()
            out = self._call(i in lat_at)
            t1 = t.perf_counter()
            t.sync()
            t2 = t.perf_counter()
            if not self._traced(i in lat_at):
                walls.append((t2 - t0) * 1000)
                hosts.append((t1 - t0) * 1000)
            self._end(out, keep=i in lat_at)
            del out
            t.collect()
        lat_samples = [lat_at[i] for i in sorted(lat_at)]

        # the device clock: calls queued back to back, events around each. Before each call the GPU gets a head start
        # (a spin of about twice the host's dispatch time, measured above): the host has queued the whole call before
        # the start event runs, so the events hold the GPU's work and none of the host's, however busy the host is.
        head = self._cycles(min(cfg.head_start_max_ms, 2.0 * statistics.median(hosts) + 0.05))
        at = dict(zip(sample_indices(self.plan.positions, reps), range(n)))
        stream = t.current_stream()
        starts = [t.event() for _ in range(reps)]
        ends = [t.event() for _ in range(reps)]
        for i in range(reps):
            self._fill(self.plan.pool_seeds[at[i]] if i in at else None)
            flush_l2()
            t.sleep(head)
            t.record(starts[i], stream)
            out = self._call(i in at)
            t.record(ends[i], stream)
            self._end(out, keep=i in at)  # the sampled output's copy is queued after the end event: not timed
            del out
            t.collect()
        t.sync()
        times = [t.elapsed(starts[i], ends[i]) for i in range(reps) if not self._traced(i in at)]
        samples = lat_samples + [at[i] for i in sorted(at)]  # the order the outputs were kept in

        stats = self._stats(times, samples, "")
        stats.latency_ms, stats.latency_spread_pct = statistics.median(walls), spread_pct(walls)
        stats.host_ms, stats.latency_repeats = statistics.median(hosts), lat_reps
        return stats

    def energy(self, stats: BenchStats, base: int) -> None:
        """Energy per call into `stats` (energy_mj and its spread over blocks), or why not (energy_note).

        The counter moves in steps: two of them with the GPU idle give its step and the idle power. Each block starts
        on a fresh step, queues calls back to back for at least energy_block_ms and energy_periods steps, waits for
        the GPU to run them all, then for the counter's next step: that reading holds all of the block's energy plus
        the idle time since the GPU finished, which is taken off at the idle power. The calls at the plan's energy
        positions run on inputs the reference knows (pool indices from `base`) and come back to be checked.
        """
        t, cfg, counter = self.t, self.cfg, self.t.energy
        if not self.plan.energy:  # not asked for (agent run measures it with --energy or ranking by it)
            stats.energy_note = "not measured: not asked for (agent run --energy)"
            return
        if counter is None:
            stats.energy_note = self.t.energy_note
            return
        t.sync()
        first = counter.tick()
        second = counter.tick() if first is not None else None
        if first is None or second is None:
            stats.energy_note = f"{counter.label}'s energy counter did not advance within a second"
            return
        period_s = max(second[1] - first[1], 1e-6)
        idle_w = (second[0] - first[0]) / 1000.0 / period_s
        call_ms = max(stats.median_ms, stats.host_ms or 0.0, 1e-3)  # back to back, the slower of host and GPU paces it
        block_ms = max(cfg.energy_block_ms, cfg.energy_periods * period_s * 1000.0)
        per_block = int(min(cfg.energy_max_calls, max(1, math.ceil(block_ms / call_ms))))
        total = per_block * cfg.energy_blocks
        at = dict(zip(sample_indices(self.plan.energy_positions, total),
                      range(base, base + len(self.plan.energy_positions))))
        per_call, powers, kept, traces = [], [], [], []
        for b in range(cfg.energy_blocks):
            t.sync()
            start = counter.tick()
            if start is None:
                stats.energy_note = f"{counter.label}'s energy counter stopped advancing"
                return
            for j in range(per_block):
                i = b * per_block + j
                self._fill(self.plan.pool_seeds[at[i]] if i in at else None)
                # the device clock's path (the same frames, the same recording of a checked call): a forward must
                # not tell this loop from the others, where its checked calls are held to the run-time rules
                out = self._call(i in at)
                recorded = self._recorded(out, i in at)
                if recorded is not None:
                    traces.append(recorded)
                if i in at:  # a copy on the GPU, brought back after the block: a copy to the host would stall it
                    kept.append((at[i], [t.clone(o) for o in flatten(out)[1]]))
                del out
                t.collect()
            t.sync()
            done = t.perf_counter()
            end = counter.tick()
            if end is None:
                stats.energy_note = f"{counter.label}'s energy counter stopped advancing"
                return
            mj = end[0] - start[0] - idle_w * max(end[1] - done, 0.0) * 1000.0
            per_call.append(mj / per_block)
            powers.append(mj / 1000.0 / max(done - start[1], 1e-9))
        for _, outs in kept:
            self.outputs.append([t.to(o, "cpu") for o in outs])
        self.traces += traces  # only where energy was measured: the parent expects these calls' outputs then
        stats.sampled += [k for k, _ in kept]
        stats.energy_mj, stats.energy_spread_pct = statistics.median(per_call), spread_pct(per_call)
        stats.energy_blocks, stats.energy_calls, stats.energy_period_ms = cfg.energy_blocks, per_block, period_s * 1000
        stats.power_w, stats.idle_w = statistics.median(powers), idle_w
        if self.launch_counts:  # the energy loop's calls are timed calls too: each must launch the candidate's kernels
            stats.launches_min, stats.launches_max = min(self.launch_counts), max(self.launch_counts)

    def _cycles(self, ms: float) -> int:
        """GPU clock cycles in `ms`, calibrated here (the spin's rate is the SM clock, which varies by GPU and load)."""
        t, probe = self.t, 1_000_000
        t.sync()
        start, end = t.event(), t.event()
        stream = t.current_stream()
        t.record(start, stream)
        t.sleep(probe)
        t.record(end, stream)
        t.sync()
        return int(probe * ms / max(t.elapsed(start, end), 1e-6))

    def cpu(self) -> BenchStats:
        """CPU mode: wall-clock calls (interpreter timings say nothing about the GPU)."""
        t = self.t
        reps = max(1, self.cfg.cpu_reps)
        at = dict(zip(sample_indices(self.plan.positions, reps), range(len(self.plan.pool_seeds))))
        times = []
        with t.collector_off():  # as on the GPU (gpu())
            self._fill()
            self._call(False)  # warm-up
            for i in range(reps):
                self._fill(self.plan.pool_seeds[at[i]] if i in at else None)
                t0 = t.perf_counter()
                out = self._call(i in at)  # every call is checked here, so traced: its time is kept (not meaningful)
                times.append((t.perf_counter() - t0) * 1000)
                self._end(out, keep=i in at)
                del out
                t.collect()
        stats = self._stats(times, [at[i] for i in sorted(at)], "CPU mode (TRITON_INTERPRET=1): not meaningful")
        # one clock on the CPU: a call's wall time is both its device time and its latency
        stats.latency_ms, stats.latency_spread_pct, stats.host_ms = stats.median_ms, stats.spread_pct, stats.median_ms
        stats.latency_repeats = reps
        stats.energy_note = self.t.energy_note
        return stats
