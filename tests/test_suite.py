"""agent.suite: which files are answers, and the summary a set of verdicts gets (KernelBench's measures)."""

from __future__ import annotations

import math

import pytest

from agent.schema import EvalResult, Timing, Verdict
from agent.suite import answer_files, summarize


def result(verdict: Verdict, device_x: float | None = None, latency_x: float | None = None,
           compile_x: float | None = None) -> EvalResult:
    timing = None
    if device_x is not None:
        timing = Timing(candidate_ms=1.0, candidate_spread_pct=1.0, device_ms=1.0, latency_ms=1.0, repeats=100,
                        meaningful=True,
                        device_speedup_vs_eager=device_x, latency_speedup_vs_eager=latency_x,
                        device_speedup_vs_compile=compile_x, latency_speedup_vs_compile=compile_x)
    return EvalResult(verdict=verdict, message="", device="cuda", timing=timing)


def test_a_folder_gives_its_answers_in_name_order_and_nothing_else(tmp_path):
    for name in ("b.py", "a.md", "c.txt", "data.json"):
        (tmp_path / name).write_text("x")
    (tmp_path / "sub").mkdir()
    assert [p.name for p in answer_files([tmp_path])] == ["a.md", "b.py", "c.txt"]
    assert answer_files([tmp_path / "data.json"]) == [tmp_path / "data.json"]  # a file named is an answer


@pytest.mark.parametrize("make", ["missing", "empty dir"])
def test_a_path_without_answers_is_one_line(tmp_path, make):
    path = tmp_path / "x"
    if make == "empty dir":
        path.mkdir()
    with pytest.raises(ValueError) as e:
        answer_files([path])
    assert len(str(e.value).splitlines()) == 1


def test_fractions_count_every_answer_and_means_only_the_correct_ones():
    s = summarize([result(Verdict.CORRECT, 2.0, 0.5, 1.5), result(Verdict.CORRECT, 8.0, 2.0, 0.5),
                   result(Verdict.INCORRECT), result(Verdict.NO_CODE)])
    assert (s.answers, s.correct, s.fraction_correct) == (4, 2, 0.5)
    assert s.verdicts == {"correct": 2, "incorrect": 1, "no_code": 1}
    assert s.device.faster_than_eager == 0.5 and s.latency.faster_than_eager == 0.25
    assert s.device.faster_than_compile == 0.25
    assert s.device.geomean_vs_eager == pytest.approx(4.0) and s.latency.geomean_vs_eager == pytest.approx(1.0)
    assert s.device.geomean_vs_compile == pytest.approx(math.sqrt(0.75))


def test_a_baseline_no_answer_was_timed_against_has_no_fraction():
    """CPU mode times no torch.compile: '–', not 0 % (the eager comparison still has its fraction)."""
    s = summarize([result(Verdict.CORRECT, 2.0, 0.5), result(Verdict.INCORRECT)])
    assert s.device.faster_than_compile is None and s.device.faster_than_eager == 0.5


def test_no_correct_answer_has_no_mean():
    s = summarize([result(Verdict.TIMEOUT)])
    assert s.correct == 0 and s.device.geomean_vs_eager is None and s.device.faster_than_eager == 0.0


def test_answers_cpu_mode_could_not_judge_are_counted_apart():
    """needs_gpu is neither correct nor a failure: the fractions are over the answers judged."""
    s = summarize([result(Verdict.CORRECT, 2.0, 0.5), result(Verdict.INCORRECT), result(Verdict.NEEDS_GPU),
                   result(Verdict.NEEDS_GPU)])
    assert (s.answers, s.correct, s.needs_gpu, s.fraction_correct) == (4, 1, 2, 0.5)
    assert s.device.faster_than_eager == 0.5
    assert summarize([result(Verdict.NEEDS_GPU)]).fraction_correct == 0.0
