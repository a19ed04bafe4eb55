"""The benchmark driver (bench/suite: run_all.py, bench_parts.py, bench_summary.py): its pure helpers, its
process handling, and one real run of a part in CPU smoke mode. The GPU run itself is the lead's (issue 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench" / "suite"
sys.path.insert(0, str(BENCH))

import bench_parts as P  # noqa: E402
import bench_summary as S  # noqa: E402
import bench_tables as MD  # noqa: E402
import run_all  # noqa: E402
from parts import accuracy, common, runs  # noqa: E402

FIXTURE = REPO / "tests" / "data" / "ncu" / "seed_h100_metrics.ncu-rep"


# ---------------------------------------------------------------- statistics and targets


def test_agreement_is_signed_percent_of_the_reference():
    assert S.agreement_pct(1.05, 1.0) == pytest.approx(5.0)
    assert S.agreement_pct(0.95, 1.0) == pytest.approx(-5.0)
    assert S.agreement_pct(None, 1.0) is None and S.agreement_pct(1.0, None) is None and S.agreement_pct(1.0, 0) is None


def test_repeat_spread_is_range_over_median_and_needs_two_values():
    assert S.repeat_spread_pct([1.0, 1.02, 0.99]) == pytest.approx(3.0)
    assert S.repeat_spread_pct([1.0]) is None
    assert S.repeat_spread_pct([1.0, None, 1.1]) == pytest.approx(100 * 0.1 / 1.05)


def test_met_says_by_how_much_a_target_is_missed():
    assert S.met(91.0, 90.0, at_most=False) == "met"
    assert S.met(81.0, 90.0, at_most=False, points=True) == "missed by 9.0 points"
    assert S.met(81.0, 90.0, at_most=False) == "missed by 10.0 %"
    assert S.met(1.21, 1.1) == "missed by 10.0 %"
    assert S.met(None, 1.1) == "—"


def test_part_timeout_banks_unused_time_but_keeps_later_parts_minimums():
    # planned 100, 30 s unused by earlier parts, 400 s left, later parts need 60: 130
    assert S.part_timeout(100, 30, 400, 60) == 130
    # never into the reserve
    assert S.part_timeout(100, 30, 150, 60) == 90
    # overruns of earlier parts are not charged twice (negative bank counts as zero)
    assert S.part_timeout(100, -50, 400, 60) == 100
    # the last part takes whatever is left
    assert S.part_timeout(None, 0, 123, 0) == 123
    assert S.part_timeout(100, 0, 10, 60) == 0


# ---------------------------------------------------------------- ncu launches


def _launch(name: str, ns: float, dram: float | None = None) -> tuple[str, dict]:
    v = {S.DURATION: ns}
    if dram is not None:
        v[S.DRAM] = dram
    return name, v


def test_split_by_markers_gives_each_item_the_launches_after_its_marker():
    launches = [_launch(S.MARKER, 1e3), _launch("conv", 1e6), _launch("mul", 2e5), _launch(S.MARKER, 1e3),
                _launch("conv", 1e6), _launch("gap_row_kernel", 1.8e5, 91.0)]
    split = S.split_by_markers(launches, ["eager", "best_mf"])
    assert [n for n, _ in split["eager"]] == ["conv", "mul"]
    assert [n for n, _ in split["best_mf"]] == ["conv", "gap_row_kernel"]


def test_split_by_markers_refuses_a_wrong_marker_count():
    with pytest.raises(ValueError, match="2 marker launches for 3 items"):
        S.split_by_markers([_launch(S.MARKER, 1), _launch(S.MARKER, 1)], ["a", "b", "c"])


def test_summarize_launches_sums_all_kernels_and_the_candidates_own():
    s = S.summarize_launches([_launch("conv", 1.0e6, 40.0), _launch("gap_row_kernel", 0.2e6, 90.0)], own=["gap_row_kernel"])
    assert s["kernels"] == 2 and s["sum_ms"] == pytest.approx(1.2)
    assert s["own_us"] == pytest.approx(200.0) and s["own_dram_pct"] == pytest.approx(90.0)
    assert s["dram_pct_weighted"] == pytest.approx((40 * 1.0 + 90 * 0.2) / 1.2)
    assert S.summarize_launches([_launch("conv", 1e6)])["own_us"] is None


def test_read_launches_reads_a_real_report_in_launch_order():
    launches = accuracy.read_launches(FIXTURE)
    assert [n for n, _ in launches] == ["fused_multiply_gap_kernel_optimized"]
    assert launches[0][1][S.DURATION] == pytest.approx(685824.0)
    assert launches[0][1][S.DRAM] == pytest.approx(23.51, abs=0.01)


# ---------------------------------------------------------------- agent run events


def _ev(kind: str, t: datetime, **kw) -> dict:
    return {"event": kind, "time": t.isoformat(), **kw}


def test_iteration_phases_split_an_iteration_into_propose_evaluate_profile():
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    s = lambda x: t0 + timedelta(seconds=x)  # noqa: E731
    events = [
        _ev("message", s(0), text="run 20260101-000000-abcd: gap44 ..."),
        _ev("iteration", s(0), iteration=0, stage="memory-fusion", reason="starting kernel"),
        _ev("candidate", s(40), candidate="r-i0-c0"), _ev("best", s(50), candidate="r-i0-c0"),
        _ev("iteration", s(51), iteration=1, stage="memory-fusion", reason="requested"),
        _ev("usage", s(52)),
        _ev("candidate", s(120), candidate="r-i1-c1"), _ev("candidate", s(120.1), candidate="r-i1-c2"),
        _ev("best", s(131), candidate="r-i1-c2"),
    ]
    its = S.iteration_phases(events, end=s(132))
    assert [i["iteration"] for i in its] == [0, 1]
    assert its[0]["propose_s"] is None and its[0]["evaluate_s"] == pytest.approx(40) and its[0]["profile_s"] == pytest.approx(10)
    assert its[0]["wall_s"] == pytest.approx(51)
    assert its[1]["propose_s"] == pytest.approx(1) and its[1]["evaluate_s"] == pytest.approx(68)
    assert its[1]["profile_s"] == pytest.approx(10.9) and its[1]["candidates"] == 2 and its[1]["wall_s"] == pytest.approx(81)
    assert runs.run_id_from_events(events) == "20260101-000000-abcd"


def test_a_cut_iteration_has_no_wall_time():
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    its = S.iteration_phases([_ev("iteration", t0, iteration=1, stage="tuning")], end=None)
    assert its[0]["wall_s"] is None and its[0]["complete"] is False


def test_parse_events_separates_events_from_the_final_summary(tmp_path):
    f = tmp_path / "ev.jsonl"
    f.write_text('WARNING something\n{"event": "iteration", "time": "2026-01-01T00:00:00+00:00", "iteration": 0}\n'
                 '{"run": "r1", "stop_reason": "completed 1 iterations", "iterations": 1}\nnot json {\n')
    events, final = runs.parse_events(f)
    assert [e["event"] for e in events] == ["iteration"] and final["run"] == "r1"


# ---------------------------------------------------------------- tables


def _combined() -> dict:
    cand0 = {"id": "r-i0-c0", "iteration": 0, "verdict": "correct", "ms": 1.90, "spread_pct": 0.5, "eager_ms": 1.75,
             "compile_ms": 0.56, "profile": {"gap_us": 686.0, "gap_dram_pct": 23.5, "grid": 32, "kernels": ["seed_k"]}}
    best = {"id": "r-i1-c3", "iteration": 1, "verdict": "correct", "ms": 1.20, "spread_pct": 0.4, "eager_ms": 1.76,
            "compile_ms": 0.56, "speedup_vs_eager": 1.47, "speedup_vs_compile": 0.47, "why": "row: one program per row",
            "profile": {"gap_us": 185.0, "gap_dram_pct": 91.2, "grid": 2048, "kernels": ["gap_row_kernel"],
                        "bottleneck": "memory-bound: DRAM 91 %"}}
    launches = [{"name": "conv", "us": 1000.0, "dram_pct": 40.0, "grid": 100}]
    return {
        "meta": {"started": "2026-01-01T00:00:00+00:00", "command": "python3 bench/suite/run_all.py", "commit": "abc123"},
        "env": {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11", "triton": "3.6", "ncu": "Version 2025.3.1", "python": "3.11"},
        "parts": {
            "limits": {"status": "ok", "wall_s": 9.0, "data": {"copy_gbs": 2967.8, "read_conv_out_once_us_at_copy_bw": 180.9,
                                                               "conv_out_bytes": 536870912}},
            "mf_run": {"status": "ok", "wall_s": 190.0, "data": {
                "command": ["agent", "run", "--stage", "memory-fusion"], "seed_summary": cand0, "best_summary": best,
                "candidates": [cand0, best], "iterations_done": 1, "stop_reason": "completed 1 iterations",
                "iterations": [{"iteration": 1, "stage": "memory-fusion", "candidates": 8, "wall_s": 120.0, "shared_s": 40.0}]}},
            "baselines": {"status": "not needed", "wall_s": 0.0},
            "accuracy": {"status": "ok", "wall_s": 100.0, "data": {
                "timing": {"items": {"eager": {"medians_ms": [1.75, 1.76, 1.74], "spreads_pct": [0.3], "plain_loop_ms": 1.74},
                                     "best_mf": {"medians_ms": [1.2, 1.21, 1.2], "gap_medians_us": [180.0, 181.0]}}},
                "ncu": {"none": {"items": {"eager": {"sum_ms": 1.70, "kernels": 3, "launches": launches},
                                           "best_mf": {"sum_ms": 1.18, "own_us": 178.0}}},
                        "base": {"items": {"eager": {"sum_ms": 2.00, "launches": launches}}}}}},
            "throughput": {"status": "timeout", "wall_s": 60.0, "error": "Traceback\nTimeoutError: x", "data": {"phases": {"static_ms": 2.0}}},
        },
    }


def test_render_tables_has_every_section_and_judges_the_targets():
    md = MD.render_tables(_combined())
    for heading in ("## 1. Limits", "## 2. Baselines", "## 3.", "## 4. Harness accuracy", "## 5. End to end", "## 6. Agent throughput"):
        assert heading in md
    assert "NVIDIA H100 80GB HBM3" in md and "2967.8 GB/s" in md and "180.9 µs" in md
    assert "| GAP kernel DRAM throughput (ncu) | 91.2 % | ≥ 90 % | met |" in md
    assert "1.02×" in md  # 185.0 / 180.9
    assert "+2.9 %" in md  # eager: harness 1.75 vs ncu none 1.70
    assert "-12.5 %" in md  # eager vs ncu base 2.00
    assert "missed by 33.3 %" in md  # 120 s iteration vs the 90 s target
    assert "throughput: timeout" in md and "baselines" not in md.split("did not finish cleanly")[-1]
    assert "| harness vs ncu Σ kernels, clocks none (worst item) | within ±5 % | +2.9 % | met |" in md
    assert "| harness vs ncu Σ kernels, clocks base (worst item) | within ±5 % | -12.5 % | missed by 7.5 points |" in md


def test_render_tables_survives_an_empty_run():
    md = MD.render_tables({"meta": {}, "parts": {}})
    assert "## 6. Agent throughput" in md and "_limits: not run._" in md


def test_md_table_escapes_nothing_it_should_not():
    t = MD.md_table(["a", "b"], [["1", None]])
    assert t.splitlines() == ["| a | b |", "|---|---|", "| 1 | — |"]
    assert MD.fmt("a|b") == "a\\|b" and MD.fmt(None) == "—" and MD.fmt(1.23456, ".2f", " ms") == "1.23 ms"


# ---------------------------------------------------------------- processes


def test_run_until_cuts_at_the_deadline_and_kills_grandchildren(tmp_path):
    marker = tmp_path / "pids"
    cmd = ["sh", "-c", f"sleep 60 & echo $! > {marker}; sleep 60"]
    t0 = time.monotonic()
    rc, cut, wall = common.run_until(cmd, deadline=time.monotonic() + 1.0, cwd=tmp_path, env=dict(os.environ),
                                stdout=tmp_path / "o", stderr=tmp_path / "e")
    assert cut and rc is None and time.monotonic() - t0 < 10
    grandchild = int(marker.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{grandchild}").exists() or b"Z" in Path(f"/proc/{grandchild}/stat").read_bytes().rsplit(b")", 1)[1][:3]


def test_run_until_returns_the_exit_status(tmp_path):
    rc, cut, _ = common.run_until(["sh", "-c", "exit 3"], deadline=time.monotonic() + 30, cwd=tmp_path,
                             env=dict(os.environ), stdout=tmp_path / "o", stderr=tmp_path / "e")
    assert rc == 3 and not cut


def test_driver_runs_the_limits_part_in_cpu_smoke_mode(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    r = subprocess.run([sys.executable, str(BENCH / "run_all.py"), "--cpu-smoke", "--parts", "limits", "--out", str(out),
                        "--work", str(work), "--budget-s", "120"], capture_output=True, text=True, cwd=REPO, timeout=150)
    assert r.returncode == 0, r.stdout + r.stderr
    combined = json.loads((out / "bench_all.json").read_text())
    assert combined["parts"]["limits"]["status"] == "ok"
    assert combined["env"]["python"] and combined["parts"]["limits"]["data"]["conv_out_bytes"] == 16 * 128 * 256 * 256 * 4
    assert "## 1. Limits" in (out / "bench_tables.md").read_text()
    assert "## 1. Limits" in r.stdout
    again = subprocess.run([sys.executable, str(BENCH / "run_all.py"), "--tables-from", str(out / "bench_all.json")],
                           capture_output=True, text=True, cwd=REPO, timeout=60)
    assert again.returncode == 0 and "## 6. Agent throughput" in again.stdout


def test_a_part_without_time_left_is_skipped_and_reported(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    r = subprocess.run([sys.executable, str(BENCH / "run_all.py"), "--cpu-smoke", "--parts", "accuracy",
                        "--out", str(out), "--work", str(work), "--budget-s", "20"],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    combined = json.loads((out / "bench_all.json").read_text())
    assert combined["parts"]["accuracy"]["status"].startswith("skipped")
    assert r.returncode == 1 and "4. harness accuracy: skipped" in r.stdout
    assert "accuracy: skipped" in (out / "bench_tables.md").read_text()


def test_a_failing_part_writes_its_traceback_and_what_it_had(tmp_path):
    ctx = tmp_path / "ctx.json"
    ctx.write_text(json.dumps({"device": "cuda", "timeout_s": 60, "work": str(tmp_path), "out": str(tmp_path)}))
    result = tmp_path / "result.json"
    assert P.main(["accuracy", str(ctx), str(result)]) == 1  # no "params": a KeyError inside the part
    res = json.loads(result.read_text())
    assert "KeyError" in res["error"] and res["data"] == {}


def test_parts_cli_rejects_an_unknown_part():
    assert P.main(["nonsense", "a", "b"]) == 2
    assert set(P.PARTS) == {p.name for p in run_all.GPU_PARTS} == {p.name for p in run_all.CPU_PARTS}


# ---------------------------------------------------------------- issue 18: greedy, beam and tree side by side


def test_search_tables_record_a_runs_best_and_when_it_was_found_and_print_them_from_json(tmp_path):
    import search_tables as T
    from test_store import candidate, result

    from agent.runconfig import RunConfig
    from agent.schema import Verdict
    from agent.store import Store

    with Store(tmp_path) as store:
        run = store.create_run(RunConfig(problem="gap44", search="tree", max_candidates=4, samples=2), gpu="h100",
                               device="cuda")
        for it in (0, 1, 2):
            store.record_iteration(run, it, "memory-fusion", "", "requested", None)
        for it, idx, ms in ((0, 0, 2.0), (1, 1, 1.5), (1, 2, None), (2, 1, 0.5), (2, 2, 0.9)):
            candidate(store, run, it, idx, result(ms=ms) if ms else result(Verdict.INCORRECT))
        store.set_best(run, f"{run}-i2-c1")
    rec = T.record(str(tmp_path), run, "tree", 61.2)
    assert (rec["judged"], rec["correct"], rec["reached_at"], rec["best"]["candidate"]) == (4, 3, 3, f"{run}-i2-c1")
    assert list(rec["refused"]) == [f"{run}-i1-c2"] and rec["refused"][f"{run}-i1-c2"].startswith("incorrect")
    (tmp_path / "search_gap44.json").write_text(json.dumps([rec, {**rec, "search": "greedy", "judged": 2}]))
    assert T.main(["table", str(tmp_path)]) == 0
    text = T.table([rec, {**rec, "search": "greedy", "judged": 2}])
    rows = [line for line in text.splitlines() if line.startswith("| gap44")]
    assert [r.split(" | ")[1] for r in rows] == ["greedy", "tree"]
    assert rows[1].split(" | ")[7:9] == ["3", "4"]  # found after 3 proposals, 4 judged
    assert "Stopped before the budget (time, or the stage ladder): gap44 greedy." in text
