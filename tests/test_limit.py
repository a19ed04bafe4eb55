"""A candidate's time limit (agent.harness.wall.limit): scaled to the problem on a GPU, said in the verdict."""

from __future__ import annotations

import time

import pytest

from agent.harness.job import BenchStats, WorkerResult
from agent.harness.wall.limit import ConfigPasses, Limit, calls, limit_for
from agent.harness.wall.sandbox import Deadline
from agent.harness.settings import settings


def baseline(eager_ms: float, latency_ms: float | None = None) -> WorkerResult:
    return WorkerResult(mode="baseline", ok=True, eager=BenchStats(median_ms=eager_ms, spread_pct=1.0, repeats=100,
                                                                   latency_ms=latency_ms or eager_ms))


def test_on_a_gpu_the_limit_is_a_start_allowance_plus_slowdown_times_the_eager_calls():
    s = settings().sandbox
    lim = limit_for("gap44", "cuda", trials=12, timed=True, base=baseline(1.75, 1.82), given_s=None)
    work_s = calls(1.82, 12, True) * 1.82 / 1000
    assert lim.seconds == pytest.approx(s.start_allowance_s + s.slowdown * work_s)
    assert lim.seconds < 60  # a hang at gap44's full size costs under a minute (212 s before)
    assert lim.why == (f"the limit for gap44 here: {s.start_allowance_s:g} s to start and compile + "
                       f"{s.slowdown:g} x the {work_s:.2f} s its eager Model takes for the same calls")


def test_a_slow_problem_gets_a_longer_limit_than_a_fast_one():
    fast = limit_for("p", "cuda", trials=12, timed=True, base=baseline(1.0), given_s=None)
    slow = limit_for("p", "cuda", trials=12, timed=True, base=baseline(200.0), given_s=None)
    assert slow.seconds > 3 * fast.seconds


def test_the_calls_counted_are_the_trials_and_both_clocks():
    t = settings().timing
    device = int(min(t.max_reps, max(t.min_reps, t.target_ms / 2.0)))
    latency = int(min(t.latency_max_reps, max(t.min_reps, t.latency_window_ms / 2.0)))
    assert calls(2.0, 12, timed=False) == 24  # each trial, and a warm-up before it
    assert calls(2.0, 12, timed=True) == 24 + t.warmup_calls + 3 + device + latency


def test_timeout_given_by_the_user_wins_and_says_so():
    lim = limit_for("gap44", "cuda", trials=12, timed=True, base=baseline(1.75), given_s=7.0)
    assert (lim.seconds, lim.why) == (7.0, "the limit given with --timeout")


def test_cpu_mode_and_a_missing_baseline_fall_back_to_the_fixed_limit():
    s = settings().sandbox
    assert limit_for("gap44", "cpu", 4, True, None, None).seconds == s.timeout_s
    assert limit_for("gap44", "cpu", 4, True, None, None).why == "the harness's fixed limit in CPU mode"
    assert limit_for("gap44", "cuda", 12, True, None, None).why == "the harness's fixed limit"



def test_only_cpu_modes_fixed_limit_is_granted_per_autotune_config_pass():
    assert limit_for("gap44", "cpu", 4, True, None, None).per_pass
    assert not limit_for("gap44", "cuda", 12, True, None, None).per_pass
    assert not limit_for("gap44", "cpu", 4, True, None, 7.0).per_pass  # --timeout is the limit, whole


def test_each_config_pass_the_worker_plans_gets_the_fixed_limit_again_up_to_a_cap(tmp_path):
    result = tmp_path / "result.json"
    passes = ConfigPasses(result, 180.0)
    assert passes() == 0.0  # nothing written yet: one pass
    result.write_text("{\"planned_passes\": ")  # being replaced
    passes._read_at = float("-inf")
    assert passes() == 0.0
    result.write_text(WorkerResult(mode="evaluate", planned_passes=3).model_dump_json())
    passes._read_at = float("-inf")
    assert passes() == 360.0
    lim = passes.limit(Limit(180.0, "the harness's fixed limit in CPU mode", per_pass=True))
    assert lim.seconds == 540.0 and lim.why.endswith("180 s for each of 3 autotune config passes")
    result.write_text(WorkerResult(mode="evaluate", planned_passes=50).model_dump_json())
    passes._read_at = float("-inf")
    assert passes() == 180.0 * (settings().sandbox.cpu_config_passes_timed - 1)


def test_a_deadline_counts_the_seconds_granted_while_it_runs():
    granted = [0.0]
    d = Deadline()
    d.arm(-1.0, lambda: granted[0])
    assert d.passed()
    granted[0] = 60.0
    assert not d.passed()
    d.cancel()
    time.sleep(0.01)
    assert d.passed()  # cancel ends it at once, whatever was granted
