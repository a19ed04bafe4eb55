"""Energy per call (agent.harness.worker.energy, Bench.energy) as a specification, on the simulated GPU of test_timing with
a simulated NVML counter; then what carries it (judge, Timing, the loop's best, the leaderboard) and, end to end on
this CPU machine, how every command says it was not measured and why (`agent eval --objective energy --json`:
tests/test_harness.py::test_cli_eval_json_has_both_clocks_the_objective_energy_and_where_the_time_went)."""

from __future__ import annotations

import bisect
import json
import shutil
import sys
import types
from pathlib import Path

import pytest
import torch
from test_report import RECORDED, agent
from test_timing import SimGpu, baselines, worker

from agent.harness.worker.energy import EnergyCounter, open_counter
from agent.harness.job import BenchStats, TimingPlan
from agent.harness.settings import settings
from agent.harness.worker.timing import Bench
from agent.harness.judge.validate import Reference, compare_timed
from agent.schema import NOT_RECORDED, Timing

BUSY_W, IDLE_W = 400.0, 80.0


class SimEnergy:
    """NVML's counter on the simulated GPU: mJ = W x ms, BUSY_W while the queue runs, IDLE_W otherwise; the reading
    moves in steps of `period_ms`; each read costs the host `poll_ms`."""

    def __init__(self, gpu: SimGpu, period_ms: float = 20.0, poll_ms: float = 0.2) -> None:
        self.gpu, self.period_ms, self.poll_ms = gpu, period_ms, poll_ms
        self.starts: list[float] = []  # the queue's busy intervals, in order (one queue: they never overlap)
        self.ends: list[float] = []
        self.done = [0.0]  # busy time of the first k intervals
        forward = gpu.forward

        def tracked() -> torch.Tensor:
            before = max(gpu.queue, gpu.host + gpu.host_ms / 2)
            out = forward()
            self.starts.append(before)
            self.ends.append(gpu.queue)
            self.done.append(self.done[-1] + gpu.queue - before)
            return out

        gpu.forward = tracked  # type: ignore[method-assign]

    def joules_until(self, t: float) -> float:
        k = bisect.bisect_right(self.ends, t)  # intervals over by t, and the one running at t
        busy = self.done[k] + (max(0.0, t - self.starts[k]) if k < len(self.starts) else 0.0)
        return IDLE_W * t + (BUSY_W - IDLE_W) * busy

    def read(self) -> int:
        self.gpu.host += self.poll_ms
        step = int(self.gpu.host // self.period_ms) * self.period_ms
        return int(self.joules_until(step))

    def counter(self) -> EnergyCounter:
        return EnergyCounter(self.read, self.gpu.perf_counter, "the simulated GPU")


def timed(gpu: SimGpu, plan: TimingPlan | None = None) -> tuple[BenchStats, Bench]:
    b = Bench(gpu.forward, [], plan, settings().timing, gpu)
    return b.gpu(), b


def test_a_gpu_bound_calls_energy_is_its_gpu_time_at_busy_power_within_one_step_of_the_counter():
    gpu = SimGpu(host_ms=0.02, device_ms=1.4)
    sim = SimEnergy(gpu)
    gpu.energy, gpu.energy_note = sim.counter(), ""
    stats, _ = timed(gpu)
    cfg = settings().timing
    truth = BUSY_W * 1.4  # W x ms = mJ
    assert stats.energy_period_ms == pytest.approx(20.0, abs=0.1)
    assert stats.energy_blocks == cfg.energy_blocks
    assert stats.energy_calls * 1.4 >= cfg.energy_block_ms  # each block at least energy_block_ms long
    # each block ends on the counter's next step, less the idle energy after the GPU finished: no step is lost
    assert stats.energy_mj == pytest.approx(truth, rel=0.01)
    assert stats.energy_spread_pct is not None and stats.power_w == pytest.approx(BUSY_W, rel=0.01)
    assert stats.idle_w == pytest.approx(IDLE_W, rel=0.02) and stats.energy_note == ""


def test_a_host_bound_calls_energy_counts_the_idle_gaps_between_its_kernels():
    """Back to back, a call that the host issues in 0.1 ms keeps the GPU busy 0.047 ms of it: the rest idles."""
    gpu = SimGpu(host_ms=0.10, device_ms=0.047)
    gpu.energy = SimEnergy(gpu).counter()
    stats, _ = timed(gpu)
    truth = BUSY_W * 0.047 + IDLE_W * (0.10 - 0.047)
    assert stats.energy_mj == pytest.approx(truth, rel=0.02)


def test_a_slow_counter_gets_blocks_of_enough_of_its_steps():
    gpu = SimGpu(host_ms=0.02, device_ms=1.0)
    gpu.energy = SimEnergy(gpu, period_ms=100.0).counter()
    stats, _ = timed(gpu)
    assert stats.energy_period_ms == pytest.approx(100.0, abs=0.1)
    assert stats.energy_calls * 1.0 >= settings().timing.energy_periods * 100.0  # 1 s blocks, not 200 ms


def test_the_energy_loops_calls_are_checked_at_the_plans_positions_after_both_clocks():
    n, e = settings().timing.checked_calls, settings().timing.energy_checked_calls
    plan = TimingPlan(pool_seeds=list(range(2 * n + e)), positions=[i / n for i in range(n)],
                      latency_positions=[(i + 0.5) / n for i in range(n)],
                      energy_positions=[(i + 0.5) / e for i in range(e)], fresh_seed=7)
    assert list(plan.energy_pool) == list(range(2 * n, 2 * n + e))
    gpu = SimGpu(host_ms=0.02, device_ms=1.0)
    gpu.energy = SimEnergy(gpu).counter()
    stats, b = timed(gpu, plan)
    assert stats.sampled == list(range(n, 2 * n)) + list(range(n)) + list(range(2 * n, 2 * n + e))
    assert len(b.outputs) == 2 * n + e


def test_a_plan_without_energy_runs_no_energy_loop_and_the_clocks_are_the_same():
    """agent run measures energy only with --energy or --objective energy: its loop holds the GPU about 4 s a
    candidate (four blocks of ten counter steps), more than both clocks together."""
    from agent.harness.job import plan_timing

    plan = plan_timing("cuda", 3, measure_energy=False)
    n = settings().timing.checked_calls
    assert not plan.energy and plan.energy_positions == [] and len(plan.pool_seeds) == 2 * n
    assert plan_timing("cuda", 3).energy and len(plan_timing("cuda", 3).pool_seeds) == 2 * n + \
        settings().timing.energy_checked_calls
    gpu = SimGpu(host_ms=0.02, device_ms=1.0)
    gpu.energy = SimEnergy(gpu).counter()
    stats, b = timed(gpu, plan)
    assert stats.energy_mj is None and stats.energy_note == "not measured: not asked for (agent run --energy)"
    assert stats.sampled == list(range(n, 2 * n)) + list(range(n)) and len(b.outputs) == 2 * n
    again = SimGpu(host_ms=0.02, device_ms=1.0)
    again.energy = SimEnergy(again).counter()
    measured, _ = timed(again, plan.model_copy(update={"energy": True, "energy_positions": [0.5],
                                                        "pool_seeds": plan.pool_seeds + [99]}))
    assert measured.energy_mj is not None and measured.median_ms == pytest.approx(stats.median_ms, rel=1e-6)


def test_without_a_counter_energy_is_not_measured_and_says_why():
    gpu = SimGpu(host_ms=0.02, device_ms=1.0)
    stats, _ = timed(gpu)
    assert stats.energy_mj is None and stats.energy_note == "a simulated GPU without an energy counter"
    stuck = SimGpu(host_ms=0.02, device_ms=1.0)

    def polled() -> int:  # a counter that never moves; each look at it takes the host a millisecond
        stuck.host += 1.0
        return 42

    stuck.energy = EnergyCounter(polled, stuck.perf_counter, "an old GPU")
    stats, _ = timed(stuck)
    assert stats.energy_mj is None and stats.energy_note == "an old GPU's energy counter did not advance within a second"
    cpu = SimGpu(host_ms=1.0, device_ms=1.0)
    cpu.energy_note = "CPU mode: no GPU energy counter"
    assert Bench(cpu.forward, [], None, settings().timing, cpu).cpu().energy_note == "CPU mode: no GPU energy counter"


# ---------------------------------------------------------------- opening NVML (a fake pynvml where it matters)


def fake_pynvml(monkeypatch, *, init: Exception | None = None, unsupported: bool = False) -> None:
    class NVMLError(Exception):
        pass

    class NotSupported(NVMLError):
        pass

    def do_init() -> None:
        if init is not None:
            raise init

    def energy(handle: object) -> int:
        if unsupported:
            raise NotSupported("Not Supported")
        return 123_456

    mod = types.SimpleNamespace(NVMLError=NVMLError, NVMLError_NotSupported=NotSupported, nvmlInit=do_init,
                                nvmlDeviceGetTotalEnergyConsumption=energy)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    monkeypatch.setattr("agent.harness.worker.energy._handle", lambda pynvml, device: ("handle", "Tesla K80"))


def test_open_counter_reads_nvml_or_says_why_not(monkeypatch):
    fake_pynvml(monkeypatch)
    counter = open_counter()
    assert isinstance(counter, EnergyCounter) and counter.read() == 123_456
    fake_pynvml(monkeypatch, init=RuntimeError("NVML Shared Library Not Found"))
    assert open_counter() == "NVML is not available (NVML Shared Library Not Found)"
    fake_pynvml(monkeypatch, unsupported=True)
    assert open_counter() == ("Tesla K80 has no energy counter (NVML: not supported; Volta and newer GPUs have "
                              "one)")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    assert open_counter() == "NVML's Python bindings are not installed (pip install nvidia-ml-py)"


# ---------------------------------------------------------------- what carries it


def test_the_timing_carries_energy_per_call_and_what_the_baselines_take():
    from agent.harness.judge.verdict import timing_from

    w, base = worker(0.05, 0.12), baselines()
    assert w.timing is not None and base.eager is not None and base.compiled is not None
    w.timing.energy_mj, w.timing.energy_spread_pct, w.timing.power_w = 20.0, 1.5, 400.0
    base.eager.energy_mj, base.compiled.energy_mj = 700.0, 220.0
    t = timing_from(w, Reference(trials=[], truths=[]), base, "cuda", "energy")
    assert (t.energy_mj, t.energy_spread_pct, t.eager_energy_mj, t.compile_energy_mj) == (20.0, 1.5, 700.0, 220.0)
    assert t.energy_vs_eager == pytest.approx(35.0) and t.energy_vs_compile == pytest.approx(11.0)
    assert t.candidate_ms == 0.05 and t.energy_note == ""  # the energy objective's plain time: the device clock
    assert t.clock("energy") == (20.0, 1.5) and t.ranks_by("energy") == "energy"
    unmeasured = timing_from(worker(0.05, 0.12), Reference(trials=[], truths=[]), baselines(), "cuda", "energy")
    assert unmeasured.energy_mj is None and unmeasured.energy_note == "not measured"
    assert unmeasured.clock("energy") == (0.12, 4.0) and unmeasured.ranks_by("energy") == "latency"
    old = Timing.model_validate({"candidate_ms": 1.0, "candidate_spread_pct": 1.0, "repeats": 5, "meaningful": True})
    assert old.energy_mj is None and old.energy_note == NOT_RECORDED


def test_timed_outputs_of_the_energy_loop_may_be_missing_only_where_energy_was_not_measured():
    truth = [torch.ones(2)]
    ref = Reference(trials=[], truths=[], pool=[truth, truth, truth])
    outs = [[torch.ones(2)], [torch.ones(2)]]
    assert compare_timed(ref, [0, 1], outs, 10, optional=range(2, 3)) is None
    assert "2 of the 3 checked outputs" in (compare_timed(ref, [0, 1], outs, 10) or "")
    assert compare_timed(ref, [0, 0], outs, 10, optional=range(2, 3)) is not None  # the same input twice


def test_on_the_energy_objective_the_loop_keeps_the_candidate_with_less_energy_per_call():
    from agent.loop import Best, _faster
    from agent.schema import EvalResult, Verdict

    def result(ms: float, mj: float | None) -> EvalResult:
        return EvalResult(verdict=Verdict.CORRECT, message="", timing=Timing(
            candidate_ms=ms, candidate_spread_pct=0.5, device_ms=ms, latency_ms=ms, latency_spread_pct=0.5,
            energy_mj=mj, energy_spread_pct=0.5, repeats=10, meaningful=True))

    best_t = result(1.0, 100.0).timing
    assert best_t is not None
    best = Best(candidate="b", code="", ms=100.0, spread_pct=0.5, timing=best_t, objective="energy")
    assert _faster(result(1.2, 80.0), best, "energy")  # slower, but less energy: what this run wants
    assert not _faster(result(0.8, 120.0), best, "energy")
    assert _faster(result(0.8, None), best, "energy")  # no energy on one side: compared on what both have


# ---------------------------------------------------------------- end to end on this machine (no GPU)


def test_the_leaderboard_show_and_its_json_say_why_energy_was_not_measured(tmp_path: Path):
    root = tmp_path / "store"
    shutil.copytree(RECORDED, root, ignore=shutil.ignore_patterns("answers", "record.py"))
    r = agent("leaderboard", "--root", str(root))
    assert r.returncode == 0, r.stderr
    header = next(line for line in r.stdout.splitlines() if " candidate " in line)
    assert "energy" in header and "† energy: not measured: CPU mode: no GPU energy counter" in r.stdout
    rows = json.loads(agent("leaderboard", "--json", "--root", str(root)).stdout)
    assert rows and all(row["energy_mj"] is None and row["energy_note"] == "CPU mode: no GPU energy counter"
                        for row in rows)
    shown = agent("show", rows[0]["candidate"], "--root", str(root), "--no-pager")
    assert "energy: not measured: CPU mode: no GPU energy counter" in shown.stdout.replace("\n", " ")


def test_runs_that_optimize_energy_rank_by_energy_among_themselves(tmp_path: Path):
    from agent.runconfig import RunConfig
    from agent.schema import Candidate, EvalResult, Verdict
    from agent.store import Store
    from agent.view import leaderboard_table

    def timing(ms: float, mj: float, objective: str) -> Timing:
        return Timing(objective=objective, candidate_ms=ms, candidate_spread_pct=1.0, device_ms=ms, latency_ms=ms,
                      energy_mj=mj, repeats=10, meaningful=True)  # type: ignore[arg-type]

    with Store(tmp_path) as s:
        ids = {}
        for objective, figures in (("energy", {"lean": (0.9, 40.0), "quick": (0.5, 90.0)}),
                                   ("latency", {"fast": (0.4, 95.0)})):
            run = s.create_run(RunConfig(objective=objective), gpu="H100", device="cuda")  # type: ignore[arg-type]
            s.record_iteration(run, 1, "memory-fusion", "", "requested", None)
            for k, (name, (ms, mj)) in enumerate(figures.items(), start=1):
                ids[name] = s.candidate_id(run, 1, k)
                s.record_candidate(Candidate(id=ids[name], run_id=run, iteration=1, index=k, stage="memory-fusion",
                                             result=EvalResult(verdict=Verdict.CORRECT, message="",
                                                               timing=timing(ms, mj, objective))))
        rows = s.leaderboard()
    # by time among the latency run's, by energy among the energy run's (mJ and ms are never ranked together)
    assert [(r.candidate, r.rank) for r in rows] == [(ids["fast"], 1), (ids["lean"], 1), (ids["quick"], 2)]
    assert [r.energy_mj for r in rows] == [95.0, 40.0, 90.0] and all(r.energy_note == "" for r in rows)
    from rich.console import Console

    c = Console(width=250, record=True)
    c.print(leaderboard_table(rows))
    text = c.export_text()
    assert "energy" in text and "40.0 mJ" in text and "not measured" not in text


def test_show_puts_energy_beside_both_clocks_with_what_it_saves():
    from rich.console import Console

    from agent.schema import EvalResult, Verdict
    from agent.view import timing_table

    t = Timing(objective="energy", candidate_ms=0.05, candidate_spread_pct=1.0, device_ms=0.05, latency_ms=0.12,
               eager_device_ms=1.75, eager_latency_ms=1.8, energy_mj=20.0, energy_spread_pct=1.2,
               eager_energy_mj=700.0, energy_vs_eager=35.0, power_w=400.0, repeats=200, meaningful=True)
    c = Console(width=200, record=True)
    c.print(timing_table(EvalResult(verdict=Verdict.CORRECT, message="", timing=t)))
    text = c.export_text()
    assert "energy ◆" in text and "20.0 mJ" in text and "700 mJ" in text and "35.00× less" in text
    assert "400 W while the calls ran back to back" in text


def test_the_energy_loops_checked_calls_are_traced_and_every_call_has_the_same_callers():
    """A forward that could tell the energy loop from the device clock's (by the frames above it) could cheat on
    energy alone: every loop calls it through the same path, and the energy loop's checked calls are traced too."""
    import inspect

    from test_timing import TracingTracker

    n, e = settings().timing.checked_calls, settings().timing.energy_checked_calls
    plan = TimingPlan(pool_seeds=list(range(2 * n + e)), positions=[i / n for i in range(n)],
                      latency_positions=[(i + 0.5) / n for i in range(n)],
                      energy_positions=[(i + 0.5) / e for i in range(e)], fresh_seed=7)
    gpu = SimGpu(host_ms=0.02, device_ms=1.0)
    gpu.energy = SimEnergy(gpu).counter()
    forward, depths = gpu.forward, set()

    def call() -> torch.Tensor:
        depths.add(len(inspect.stack(0)))
        return forward()

    tracker = TracingTracker(gpu)
    b = Bench(call, [], plan, settings().timing, gpu, tracker)
    stats = b.gpu()
    assert stats.energy_mj is not None and tracker.traced == 2 * n + e and len(b.traces) == 2 * n + e
    assert len(depths) == 1
