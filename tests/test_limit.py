"""A candidate's time limit (agent.harness.limit): scaled to the problem on a GPU, said in the verdict."""

from __future__ import annotations

import pytest

from agent.harness.job import BenchStats, WorkerResult
from agent.harness.limit import calls, limit_for
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
