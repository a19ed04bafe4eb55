"""agent.view: renderables for runs and candidates, and the run loop's progress reporter in each of its modes."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone

from rich.console import Console

from agent.runconfig import RunConfig
from agent.schema import (
    Answer,
    Candidate,
    EvalResult,
    Timing,
    Usage,
    Verdict,
)
from agent.store import LeaderRow, RunRecord
from agent.view import (
    LiveProgress,
    candidate_view,
    leaderboard_table,
    run_summary,
    short_candidate_id,
)

RUN = "20261123-081502-3fa2"


def cand(index: int, verdict: Verdict = Verdict.CORRECT, ms: float | None = 0.5) -> Candidate:
    t = Timing(candidate_ms=ms, candidate_spread_pct=1.0, eager_ms=1.76, compile_ms=0.56, speedup_vs_eager=1.76 / ms,
               speedup_vs_compile=0.56 / ms, repeats=10, meaningful=True) if ms else None
    return Candidate(id=f"{RUN}-i1-c{index}", run_id=RUN, iteration=1, index=index, stage="memory-fusion",
                     code="x = 1\n", prompt="p", answer=Answer(text="a", model="m"),
                     result=EvalResult(verdict=verdict, message="ok" if t else "line 2: [bold]boom[/]\nmore",
                                       timing=t))


def console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=200, force_terminal=False, color_system=None), buf


def events(p: LiveProgress) -> None:
    p.start_iteration(1, "memory-fusion", "requested")
    p.candidate_done(cand(1))
    p.candidate_done(cand(2, Verdict.COMPILE_ERROR, None))
    p.new_best(cand(1))
    p.usage(Usage(prompt_tokens=1200, completion_tokens=300, cost_usd=0.0123))
    p.message("stopped: patience")


def test_json_mode_writes_one_object_per_event() -> None:
    out = io.StringIO()
    with LiveProgress("json", stream=out) as p:
        events(p)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in lines] == ["iteration", "candidate", "candidate", "best", "usage", "message"]
    assert lines[1]["verdict"] == "correct" and lines[1]["speedup_vs_eager"] == 1.76 / 0.5
    assert lines[2]["message"] == "line 2: [bold]boom[/]"
    assert lines[4]["cost_usd"] == 0.0123


def test_json_phase_events_carry_the_phase_a_total_and_the_elapsed_time() -> None:
    out = io.StringIO()
    with LiveProgress("json", stream=out) as p:
        p.start_iteration(1, "memory-fusion", "requested")
        p.phase("evaluating", total=4)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert events[1]["event"] == "phase" and events[1]["phase"] == "evaluating" and events[1]["total"] == 4
    assert all(e["elapsed_s"] >= 0 for e in events)


def test_the_footer_says_the_phase_how_far_it_is_and_how_long_it_has_run() -> None:
    buf = io.StringIO()
    c = Console(file=buf, width=160, force_terminal=True, color_system=None)
    with LiveProgress("auto", console=c, total_iterations=5) as p:
        p.start_iteration(1, "memory-fusion", "requested")
        p.phase("evaluating", total=4)
        p.candidate_done(cand(1))
    assert "evaluating 4: 1 done" in buf.getvalue() and "run 0:0" in buf.getvalue()


def test_a_log_gets_a_still_line_during_a_long_phase() -> None:
    import time

    c, buf = console()
    with LiveProgress("lines", console=c, heartbeat_s=0.2) as p:
        p.phase("proposing", "4 answers from openai:gpt-4o")
        time.sleep(0.7)
    assert "still proposing: 4 answers from openai:gpt-4o" in buf.getvalue()


def test_quiet_mode_prints_nothing() -> None:
    c, buf = console()
    out = io.StringIO()
    with LiveProgress("quiet", console=c, stream=out) as p:
        events(p)
    assert buf.getvalue() == "" and out.getvalue() == ""


def test_lines_mode_prints_each_event_once() -> None:
    c, buf = console()
    with LiveProgress("auto", console=c, total_iterations=5) as p:  # not a terminal: lines
        assert p.mode == "lines"
        events(p)
    text = buf.getvalue()
    assert "iteration 1/5" in text and "memory-fusion" in text
    assert f"{RUN}-i1-c2" in text and "compile_error" in text and "line 2: [bold]boom[/]" in text
    assert "new best" in text and "3.52× eager" in text and "stopped: patience" in text


def test_live_mode_on_a_terminal_leaves_the_final_state() -> None:
    buf = io.StringIO()
    c = Console(file=buf, width=120, force_terminal=True, color_system=None)
    with LiveProgress("auto", console=c, total_iterations=5) as p:
        assert p.mode == "live"
        events(p)
    text = buf.getvalue()
    assert "iteration 1/5" in text and "1,500 tokens" in text and "$0.0123" in text


def test_renderables_render() -> None:
    c, buf = console()
    row = LeaderRow(rank=1, candidate=f"{RUN}-i1-c1", run=RUN, problem="gap44", stage="memory-fusion", iteration=1,
                    verdict=Verdict.CORRECT, candidate_ms=0.5, speedup_vs_eager=3.52, speedup_vs_compile=1.12,
                    dram_pct=88.7, tokens=1500, cost_usd=0.01, meaningful=False)
    run = RunRecord(id=RUN, config=RunConfig(), gpu="h100", device="cuda", started_at=datetime.now(timezone.utc),
                    best=row.candidate, usage=Usage(prompt_tokens=1000, completion_tokens=500, cost_usd=0.01))
    c.print(leaderboard_table([row]))
    c.print(candidate_view(cand(2, Verdict.RUNTIME_ERROR, None)))
    c.print(run_summary(run, [row]))
    text = buf.getvalue()
    assert "n/a (CPU mode)" in text and "3.52×" not in text  # a CPU-mode row's ratio is no speedup
    assert "88.7 %" in text and "CPU-mode" in text
    assert "runtime_error" in text and "[bold]boom[/]" in text  # messages are text, never markup
    assert "1,500 tokens" in text and RUN in text
    assert "search      greedy, memory off" in text  # RunConfig's own defaults: what runs before issue 18 had


def test_short_candidate_ids_keep_the_run_tag() -> None:
    assert short_candidate_id(f"{RUN}-i3a2-c1", RUN) == "3fa2-i3a2-c1"
    assert short_candidate_id("other", RUN) == "other"


def test_the_full_leaderboard_and_a_candidate_say_where_each_candidate_started() -> None:
    c, buf = console()
    base = dict(run=RUN, problem="gap44", stage="memory-fusion", verdict=Verdict.CORRECT, candidate_ms=0.5)
    rows = [LeaderRow(rank=1, candidate=f"{RUN}-i2-c1", iteration=2, parent=f"{RUN}-i1-c2", **base),
            LeaderRow(rank=2, candidate=f"{RUN}-i0-c0", iteration=0, **base)]
    c.print(leaderboard_table(rows))
    header, first, second = [line for line in buf.getvalue().splitlines() if RUN[:8] in line or "parent" in line][:3]
    assert header.split()[:3] == ["#", "candidate", "parent"]
    assert first.split()[2] == "i1-c2" and second.split()[2] == "–"
    assert "parent" not in str(leaderboard_table(rows, compact=True).columns[2].header)
    c2, buf2 = console()
    child = cand(2, Verdict.CORRECT, 0.4).model_copy(update={"parent": f"{RUN}-i1-c2", "idea": "split rows",
                                                           "finding": "small-grid"})
    c2.print(candidate_view(child))
    assert f"parent     {RUN}-i1-c2" in buf2.getvalue() and "idea       split rows  (for small-grid)" in buf2.getvalue()


def test_the_timing_table_shows_torch_compile_with_tf32_off_where_it_was_timed() -> None:
    from agent.view import timing_table

    base = dict(candidate_ms=3.2, candidate_spread_pct=1.0, device_ms=3.2, latency_ms=3.3, eager_device_ms=4.7,
                compile_device_ms=2.4, device_speedup_vs_compile=0.75, repeats=10, meaningful=True)
    for extra, shown in (({}, False), (dict(compile_fp32_device_ms=5.1, compile_fp32_latency_ms=5.2,
                                            device_speedup_vs_compile_fp32=1.59), True)):
        c, buf = console()
        c.print(timing_table(EvalResult(verdict=Verdict.CORRECT, message="", timing=Timing(**base, **extra))))
        text = buf.getvalue()
        assert ("torch.compile, TF32 off" in text) == shown and ("1.59×" in text) == shown
        assert "0.75×" in text
