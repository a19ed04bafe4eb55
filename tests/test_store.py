"""agent.store: files are the truth, SQLite the index; nothing finished is ever lost, nothing half-written is indexed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agent.errors import UserError
from agent.runconfig import RunConfig
from agent.schema import (
    Answer,
    Bottleneck,
    Candidate,
    Check,
    EvalResult,
    KernelProfile,
    Profile,
    Timing,
    Usage,
    Verdict,
)
from agent.store import (
    DRAM_METRIC,
    DURATION_METRIC,
    Store,
    apply_migrations,
    longest_kernel_dram_pct,
)

REPO = Path(__file__).resolve().parent.parent
EAGER_MS, COMPILE_MS = 1.76, 0.56


# ---------------------------------------------------------------- builders


def timing(ms: float, meaningful: bool = True) -> Timing:
    return Timing(candidate_ms=ms, candidate_spread_pct=1.0, eager_ms=EAGER_MS, compile_ms=COMPILE_MS,
                  speedup_vs_eager=EAGER_MS / ms, speedup_vs_compile=COMPILE_MS / ms, repeats=100,
                  meaningful=meaningful)


def result(verdict: Verdict = Verdict.CORRECT, ms: float | None = 1.0, code: str = "class ModelNew: pass\n") -> EvalResult:
    ok = verdict == Verdict.CORRECT
    return EvalResult(
        verdict=verdict, message="max error 3e-06 within 1e-04" if ok else "line 3: mismatch at [0, 1]",
        checks=[Check(size="full", shapes=[[128, 64, 32, 32]], distribution="normal", error=3e-6, eager_error=2e-6,
                      tolerance=1e-4, passed=ok)],
        timing=timing(ms) if ok and ms is not None else None, kernels=["gap_kernel"], code=code, device="cuda",
        duration_s=2.5,
    )


def profile(dram_long: float = 88.7, dram_short: float = 12.0) -> Profile:
    return Profile(
        report=Path("profiles/x.ncu-rep"), gpu="h100",
        kernels={
            "short_kernel": KernelProfile(name="short_kernel", metrics={DURATION_METRIC: 5_000, DRAM_METRIC: dram_short}),
            "gap_kernel": KernelProfile(name="gap_kernel", grid=[32, 1, 1], block=[128, 1, 1],
                                        metrics={DURATION_METRIC: 686_000, DRAM_METRIC: dram_long,
                                                 "launch__grid_size": 32}),
        },
        bottleneck=Bottleneck(kind="latency-bound", reason="grid 32 on 132 SMs", figures={"dram_pct": dram_long}),
    )


def candidate(store: Store, run_id: str, iteration: int, index: int, res: EvalResult, *, stage: str = "memory-fusion",
              prof: Profile | None = None, usage: Usage | None = None) -> Candidate:
    c = Candidate(
        id=store.candidate_id(run_id, iteration, index), run_id=run_id, iteration=iteration, index=index, stage=stage,
        code=res.code, prompt=f"# prompt for iteration {iteration}\n[NCU PROFILING METRICS]\n",
        answer=Answer(text=f"```python\n{res.code}```\n", model="gpt-4o", usage=usage or Usage(), latency_s=1.5,
                      raw=json.dumps({"id": "chatcmpl-1", "choices": [{"index": index}]})),
        result=res, profile=prof,
    )
    store.record_candidate(c)
    return c


def new_run(store: Store, **config) -> str:
    return store.create_run(RunConfig(**config), gpu="h100", device="cuda")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with Store(tmp_path) as s:
        yield s


# ---------------------------------------------------------------- runs


def test_run_ids_are_sortable_unique_and_written_to_run_json(store: Store) -> None:
    ids = [new_run(store) for _ in range(5)]
    assert len(set(ids)) == 5
    assert all(len(i.split("-")) == 3 and len(i.split("-")[0]) == 8 for i in ids)
    for i in ids:
        stored = json.loads((store.candidates_dir / i / "run.json").read_text())
        assert stored["id"] == i and stored["status"] == "running" and stored["gpu"] == "h100"
    assert [r.id for r in store.list_runs()] == sorted(ids, reverse=True)


def test_get_run_reports_status_best_usage_and_iterations(store: Store) -> None:
    run = new_run(store, iterations=3, problem="gap44")
    store.record_iteration(run, 0, "memory-fusion", "", "starting kernel", None)
    c0 = candidate(store, run, 0, 0, result(ms=1.9))
    store.record_iteration(run, 1, "memory-fusion", "prompt 1", "requested", c0.id)
    candidate(store, run, 1, 1, result(ms=0.5), usage=Usage(prompt_tokens=1000, completion_tokens=500, cost_usd=0.01))
    store.set_best(run, c0.id)
    store.finish_run(run, "finished")
    r = store.get_run(run)
    assert (r.status, r.best, r.iterations, r.candidates) == ("finished", c0.id, 1, 2)
    assert r.finished_at is not None and r.finished_at >= r.started_at
    assert r.usage == Usage(prompt_tokens=1000, completion_tokens=500, cost_usd=0.01)
    assert r.config.iterations == 3


def test_unknown_run_is_a_user_error_naming_recent_runs(store: Store) -> None:
    runs = [new_run(store) for _ in range(2)]
    with pytest.raises(UserError) as e:
        store.get_run("20990101-000000-dead")
    assert "unknown run" in e.value.message and all(r in e.value.message for r in runs)
    assert "\n" not in str(e.value)


def test_a_unique_run_prefix_is_enough(store: Store) -> None:
    run = new_run(store)
    assert store.get_run(run[:-2]).id == run


def test_call_usage_is_the_spend_when_calls_were_logged(store: Store) -> None:
    run = new_run(store)
    store.record_iteration(run, 1, "memory-fusion", "p", "requested", None)
    # the answers split the one call's usage; the call is the truth about spend
    for i in (1, 2):
        candidate(store, run, 1, i, result(), usage=Usage(prompt_tokens=50, completion_tokens=10, cost_usd=0.001))
    assert store.get_run(run).usage == Usage(prompt_tokens=100, completion_tokens=20, cost_usd=0.002)
    seq = store.record_call(run, 1, {"model": "gpt-4o", "n": 2}, '{"usage": {}}',
                            Usage(prompt_tokens=120, completion_tokens=20, cost_usd=0.003))
    assert seq == 1 and store.record_call(run, 1, {"model": "gpt-4o"}, "not json at all", None) == 2
    assert store.get_run(run).usage == Usage(prompt_tokens=120, completion_tokens=20, cost_usd=0.003)
    calls = store.calls(run)
    assert [c.seq for c in calls] == [1, 2] and calls[0].request == {"model": "gpt-4o", "n": 2}
    assert calls[1].response_raw == "not json at all" and calls[1].usage is None


# ---------------------------------------------------------------- candidates


def test_candidate_roundtrips_with_result_profile_and_answer(store: Store) -> None:
    run = new_run(store)
    store.record_iteration(run, 1, "memory-fusion", "p", "requested", None)
    c = candidate(store, run, 1, 1, result(ms=0.42), prof=profile(),
                  usage=Usage(prompt_tokens=7, completion_tokens=3, cost_usd=0.5))
    assert store.get_candidate(c.id) == c
    assert store.candidates(run) == [c]
    d = store.candidates_dir / run / "i1-c1"
    assert {p.name for p in d.iterdir()} == {"code.py", "prompt.md", "response.md", "response.json", "result.json",
                                             "profile.json", "candidate.json"}
    assert (d / "code.py").read_text() == c.code
    assert EvalResult.model_validate_json((d / "result.json").read_text()) == c.result
    assert json.loads((d / "response.json").read_text())["id"] == "chatcmpl-1"


def test_candidate_without_code_or_answer_roundtrips(store: Store) -> None:
    run = new_run(store)
    c = Candidate(id=store.candidate_id(run, 1, 1), run_id=run, iteration=1, index=1, stage="tuning",
                  result=EvalResult(verdict=Verdict.NO_CODE, message="no ```python block in the answer"))
    store.record_candidate(c)
    assert store.get_candidate(c.id) == c


def test_update_profile_indexes_metrics_and_dram(store: Store) -> None:
    run = new_run(store)
    c = candidate(store, run, 1, 1, result(ms=0.4))
    assert store.leaderboard()[0].dram_pct is None
    store.update_profile(c.id, profile(dram_long=91.5))
    assert store.get_candidate(c.id).profile == profile(dram_long=91.5)
    assert store.leaderboard()[0].dram_pct == 91.5
    rows = store.db.execute("SELECT kernel, metric, value FROM metrics WHERE candidate_id = ?", (c.id,)).fetchall()
    assert ("gap_kernel", DRAM_METRIC, 91.5) in [tuple(r) for r in rows] and len(rows) == 5


def test_dram_pct_comes_from_the_longest_kernel() -> None:
    assert longest_kernel_dram_pct(profile(dram_long=70.0, dram_short=99.0)) == 70.0
    assert longest_kernel_dram_pct(None) is None
    assert longest_kernel_dram_pct(Profile()) is None


def test_unknown_candidate_is_a_user_error(store: Store) -> None:
    run = new_run(store)
    c = candidate(store, run, 1, 1, result())
    with pytest.raises(UserError, match="unknown candidate 'nope'; recent: " + c.id):
        store.get_candidate("nope")


def test_candidate_found_by_unique_prefix_or_tail(store: Store) -> None:
    run = new_run(store)
    c = candidate(store, run, 1, 1, result())
    candidate(store, run, 1, 2, result())
    assert store.get_candidate(c.id[:-1] + "1").id == c.id
    assert store.get_candidate(run.rsplit("-", 1)[1] + "-i1-c1").id == c.id
    with pytest.raises(UserError, match="ambiguous"):
        store.get_candidate(run)


def test_profile_path_is_under_profiles_and_created(store: Store) -> None:
    p = store.profile_path("20261123-081502-3fa2", "20261123-081502-3fa2-i1-c1")
    assert p == store.root / "profiles" / "20261123-081502-3fa2" / "20261123-081502-3fa2-i1-c1.ncu-rep"
    assert p.parent.is_dir()


# ---------------------------------------------------------------- iterations, replay and resume


def test_iterations_keep_prompt_and_reason(store: Store) -> None:
    run = new_run(store, stage="auto")
    store.record_iteration(run, 0, "memory-fusion", "", "starting kernel", None)
    store.record_iteration(run, 1, "parallelism", "the prompt", "latency-bound (grid 32): more programs", "c0")
    its = store.iterations(run)
    assert [(i.iteration, i.stage, i.reason) for i in its] == [
        (0, "memory-fusion", "starting kernel"), (1, "parallelism", "latency-bound (grid 32): more programs")]
    assert its[1].prompt == "the prompt" and its[1].best_before == "c0"
    assert (store.candidates_dir / run / "iterations" / "i0001-a1.json").is_file()


def test_resume_state_of_an_unfinished_run(store: Store) -> None:
    run = new_run(store, samples=3)
    assert store.resume_state(run).last_iteration == -1
    store.record_iteration(run, 0, "memory-fusion", "", "starting kernel", None)
    c0 = candidate(store, run, 0, 0, result(ms=1.9))
    store.set_best(run, c0.id)
    store.record_iteration(run, 1, "memory-fusion", "p1", "requested", c0.id)
    for i in (1, 2, 3):
        candidate(store, run, 1, i, result(ms=2.0), usage=Usage(prompt_tokens=10, completion_tokens=5, cost_usd=0.1))
    store.record_iteration(run, 2, "tuning", "p2", "requested", c0.id)
    half = [candidate(store, run, 2, i, result(ms=1.0), stage="tuning") for i in (1, 2)]

    s = store.resume_state(run)
    assert (s.last_iteration, s.best, s.stage, s.pending_iteration) == (1, c0.id, "memory-fusion", 2)
    assert s.pending == half
    assert (s.usage.prompt_tokens, s.usage.completion_tokens, s.usage.cost_usd) == (30, 15, pytest.approx(0.3))

    # the resumed loop redoes iteration 2 as a second attempt: fresh ids, nothing overwritten
    store.record_iteration(run, 2, "tuning", "p2 again", "resumed", c0.id)
    redo = [candidate(store, run, 2, i, result(ms=0.9), stage="tuning") for i in (1, 2, 3)]
    assert redo[0].id == f"{run}-i2a2-c1"
    assert store.get_candidate(half[0].id) == half[0]
    assert [i.attempt for i in store.iterations(run)] == [1, 1, 2]
    assert len(store.answers(run)) == 3 + 3  # iteration 1 and the latest attempt at 2; never the starting kernel
    store.end_iteration(run, 2)
    assert store.resume_state(run).last_iteration == 2 and store.resume_state(run).pending == []


def test_reopen_marks_an_interrupted_run_running_in_this_process(store: Store) -> None:
    run = new_run(store)
    store.finish_run(run, "interrupted")
    assert store.get_run(run).status == "interrupted"
    r = store.reopen_run(run)
    assert (r.status, r.finished_at, r.pid) == ("running", None, os.getpid())
    assert json.loads((store.candidates_dir / run / "run.json").read_text())["status"] == "running"


def test_answers_are_served_in_recorded_order(store: Store) -> None:
    run = new_run(store)
    store.record_iteration(run, 0, "memory-fusion", "", "starting kernel", None)
    candidate(store, run, 0, 0, result())
    for it in (1, 2):
        store.record_iteration(run, it, "memory-fusion", "p", "requested", None)
        for i in (3, 1, 2):  # recorded out of order: replay follows (iteration, index)
            candidate(store, run, it, i, result(code=f"# it {it} c {i}\n"))
    assert [a.text.splitlines()[1] for a in store.answers(run)] == [
        f"# it {it} c {i}" for it in (1, 2) for i in (1, 2, 3)]


# ---------------------------------------------------------------- leaderboard


@pytest.fixture
def board(store: Store) -> tuple[Store, str, str]:
    a = new_run(store, problem="gap44")
    store.record_iteration(a, 1, "memory-fusion", "p", "requested", None)
    candidate(store, a, 1, 1, result(ms=0.50), usage=Usage(prompt_tokens=100, completion_tokens=20, cost_usd=0.02))
    candidate(store, a, 1, 2, result(ms=0.25), prof=profile(dram_long=85.0))
    candidate(store, a, 1, 3, result(Verdict.INCORRECT))
    candidate(store, a, 1, 4, result(Verdict.COMPILE_ERROR))
    b = new_run(store, problem="other")
    store.record_iteration(b, 1, "tuning", "p", "requested", None)
    candidate(store, b, 1, 1, result(ms=0.40), stage="tuning")
    return store, a, b


def test_leaderboard_ranks_by_time_within_each_problem(board) -> None:
    store, a, b = board
    rows = store.leaderboard()
    assert [r.candidate for r in rows] == [f"{a}-i1-c2", f"{a}-i1-c1", f"{b}-i1-c1"]
    assert [(r.problem, r.rank) for r in rows] == [("gap44", 1), ("gap44", 2), ("other", 1)]
    top = rows[0]
    assert (top.verdict, top.candidate_ms, top.dram_pct, top.problem, top.stage) == (
        Verdict.CORRECT, 0.25, 85.0, "gap44", "memory-fusion")
    assert top.speedup_vs_eager == pytest.approx(EAGER_MS / 0.25)
    assert top.speedup_vs_compile == pytest.approx(COMPILE_MS / 0.25)
    assert (rows[1].tokens, rows[1].cost_usd) == (120, 0.02)


def test_leaderboard_ranks_by_time_even_where_eager_was_timed_differently(store) -> None:
    """On the CPU eager is re-timed every round: the faster candidate must rank first whatever its ratio says."""
    run = new_run(store, problem="gap44")
    store.record_iteration(run, 1, "memory-fusion", "p", "requested", None)
    slow, fast = result(ms=44.5), result(ms=40.2)
    assert slow.timing is not None and fast.timing is not None
    slow.timing.eager_ms, slow.timing.speedup_vs_eager = 100.0, 100.0 / 44.5  # 2.25x
    fast.timing.eager_ms, fast.timing.speedup_vs_eager = 80.0, 80.0 / 40.2  # 1.99x
    candidate(store, run, 1, 1, slow)
    candidate(store, run, 1, 2, fast)
    assert [r.candidate_ms for r in store.leaderboard()] == [40.2, 44.5]


def test_on_a_tie_the_runs_own_best_comes_first_and_failures_say_why(store) -> None:
    run = new_run(store, problem="gap44")
    store.record_iteration(run, 1, "memory-fusion", "p", "requested", None)
    candidate(store, run, 1, 1, result(ms=0.5))
    best = candidate(store, run, 1, 2, result(ms=0.5))
    candidate(store, run, 1, 3, result(Verdict.INCORRECT))
    store.set_best(run, best.id)
    rows = store.leaderboard(include_all=True)
    assert [r.candidate for r in rows] == [best.id, f"{run}-i1-c1", f"{run}-i1-c3"]
    assert [r.run_best for r in rows] == [True, False, False]
    assert rows[0].message is None and rows[2].message == "line 3: mismatch at [0, 1]"


def test_leaderboard_filters(board) -> None:
    store, a, b = board
    assert {r.run for r in store.leaderboard(problem="other")} == {b}
    assert {r.run for r in store.leaderboard(run=a)} == {a}
    assert [r.candidate for r in store.leaderboard(stage="tuning")] == [f"{b}-i1-c1"]
    assert len(store.leaderboard(limit=1)) == 1
    assert store.leaderboard(problem="nothing") == []
    with pytest.raises(UserError):
        store.leaderboard(run="20990101")


def test_leaderboard_all_ranks_failures_after_correct_ones(board) -> None:
    store, a, _ = board
    rows = store.leaderboard(include_all=True)
    assert len(rows) == 5
    assert [r.verdict for r in rows][:3] == [Verdict.CORRECT] * 3
    assert {r.verdict for r in rows[3:]} == {Verdict.INCORRECT, Verdict.COMPILE_ERROR}
    assert rows[3].candidate_ms is None and rows[3].speedup_vs_eager is None


# ---------------------------------------------------------------- index: migrations and recovery


def test_migrations_are_applied_once(tmp_path: Path) -> None:
    with Store(tmp_path) as s:
        new_run(s)
        versions = [r[0] for r in s.db.execute("SELECT version FROM schema_migrations")]
    assert versions == [1, 2, 3, 4, 5, 6]
    with Store(tmp_path) as s:  # reopening applies nothing again and keeps the data
        assert [r[0] for r in s.db.execute("SELECT version FROM schema_migrations")] == [1, 2, 3, 4, 5, 6]
        assert apply_migrations(s.db) == []
        assert len(s.list_runs()) == 1


def test_a_new_migration_is_applied_once_and_a_failing_one_not_at_all(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.sqlite", isolation_level=None)
    base = [(1, "initial", "CREATE TABLE a (x INTEGER);")]
    assert apply_migrations(conn, base) == [1]
    more = base + [(2, "add_b", "CREATE TABLE b (y TEXT); INSERT INTO b VALUES ('once');")]
    assert apply_migrations(conn, more) == [2]
    assert apply_migrations(conn, more) == []
    assert conn.execute("SELECT COUNT(*) FROM b").fetchone()[0] == 1
    broken = more + [(3, "broken", "CREATE TABLE c (z INTEGER); INSERT INTO nowhere VALUES (1);")]
    with pytest.raises(sqlite3.OperationalError):
        apply_migrations(conn, broken)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "c" not in tables  # rolled back as a whole
    assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations")] == [1, 2]


def test_an_index_from_before_the_two_clocks_reads_its_times_as_device_time(tmp_path: Path) -> None:
    from agent.store.migrations import packaged_migrations

    with Store(tmp_path) as s:
        run = new_run(s)
        candidate(s, run, 1, 1, result(ms=2.0))
    # roll the index back to migration 1 with that row, as an older version of the agent left it
    db = sqlite3.connect(tmp_path / "candidates" / "index.sqlite", isolation_level=None)
    initial = packaged_migrations()[0][2]
    db.execute("DROP VIEW usage")  # migration 3's view reads a column dropped below: migration 1's comes back
    db.execute(initial[initial.index("CREATE VIEW usage"):].split(";")[0])
    cols = [r[1] for r in db.execute("PRAGMA table_info(candidates)")]
    for col in cols[cols.index("objective"):]:
        db.execute(f"ALTER TABLE candidates DROP COLUMN {col}")
    db.execute("ALTER TABLE iterations DROP COLUMN groups")  # migration 4's
    db.execute("ALTER TABLE runs DROP COLUMN stop_reason")  # migration 6's
    db.execute("DELETE FROM schema_migrations WHERE version >= 2")
    db.close()
    assert [v for v, _, _ in packaged_migrations()][:2] == [1, 2]
    with Store(tmp_path) as s:
        [row] = s.leaderboard()
        assert (row.objective, row.device_ms, row.device_speedup_vs_eager) == ("device", 2.0, EAGER_MS / 2.0)
        assert row.latency_ms is None


def test_leaderboard_rows_carry_both_clocks_and_launches(store: Store) -> None:
    run = new_run(store)
    t = Timing(objective="latency", candidate_ms=0.12, candidate_spread_pct=2.0, device_ms=0.05, latency_ms=0.12,
               host_ms=0.09, launches=2, eager_ms=1.8, speedup_vs_eager=15.0, device_speedup_vs_eager=35.0,
               latency_speedup_vs_eager=15.0, repeats=100, meaningful=True)
    candidate(store, run, 1, 1, result().model_copy(update={"timing": t}))
    [row] = store.leaderboard()
    assert (row.objective, row.candidate_ms, row.device_ms, row.latency_ms, row.launches) == ("latency", 0.12, 0.05,
                                                                                               0.12, 2)
    assert (row.device_speedup_vs_eager, row.latency_speedup_vs_eager, row.speedup_vs_eager) == (35.0, 15.0, 15.0)


def test_the_index_is_wal(store: Store) -> None:
    new_run(store)
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _snapshot(store: Store) -> tuple:
    runs = [r.model_dump(exclude={"pid", "host"}) for r in store.list_runs()]
    return (runs, store.leaderboard(include_all=True),
            [store.iterations(r["id"]) for r in runs], [store.calls(r["id"]) for r in runs],
            [store.answers(r["id"]) for r in runs])


def test_reindex_rebuilds_everything_from_the_files(board) -> None:
    store, a, _ = board
    store.set_best(a, f"{a}-i1-c2")
    store.record_call(a, 1, {"model": "gpt-4o"}, "{}", Usage(prompt_tokens=9, completion_tokens=1, cost_usd=0.5))
    store.end_iteration(a, 1)
    before = _snapshot(store)
    store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(store.db_path) + suffix).unlink(missing_ok=True)
    with Store(store.root) as fresh:  # a lost index is rebuilt on open
        assert _snapshot(fresh) == before
        assert fresh.reindex() == 5
        assert _snapshot(fresh) == before


def test_a_corrupt_index_is_set_aside_and_rebuilt(board) -> None:
    store, _, _ = board
    before = _snapshot(store)
    store.close()
    for suffix in ("-wal", "-shm"):
        Path(str(store.db_path) + suffix).unlink(missing_ok=True)
    store.db_path.write_bytes(b"this is not a database" * 100)
    with Store(store.root) as s:
        assert _snapshot(s) == before
    assert list(store.candidates_dir.glob("index.sqlite.corrupt-*"))


def test_sync_indexes_a_candidate_whose_commit_never_happened(board) -> None:
    store, a, _ = board
    store.db.execute("DELETE FROM candidates WHERE id = ?", (f"{a}-i1-c2",))
    assert len(store.leaderboard()) == 2
    assert store.sync() == 1
    assert store.leaderboard()[0].candidate == f"{a}-i1-c2"


def test_empty_root_is_not_created_by_looking(tmp_path: Path) -> None:
    s = Store(tmp_path / "nothing")
    assert not s.exists()
    assert not (tmp_path / "nothing").exists()


# ---------------------------------------------------------------- crash safety

WRITER = textwrap.dedent("""
    import sys
    from agent.runconfig import RunConfig
    from agent.schema import Answer, Candidate, EvalResult, Timing, Verdict
    from agent.store import Store

    store = Store(sys.argv[1])
    run = store.create_run(RunConfig(), gpu="h100", device="cuda")
    print("RUN", run, flush=True)
    big = "x" * 400_000  # big files: a kill is likely to land mid-write
    for it in range(1, 1000):
        store.record_iteration(run, it, "memory-fusion", big, "requested", None)
        for i in range(1, 4):
            t = Timing(candidate_ms=1.0 / it, candidate_spread_pct=1.0, eager_ms=1.76, speedup_vs_eager=1.76 * it,
                       repeats=10, meaningful=True)
            c = Candidate(id=store.candidate_id(run, it, i), run_id=run, iteration=it, index=i, stage="memory-fusion",
                          code=big, prompt=big, answer=Answer(text=big, model="m", raw=big),
                          result=EvalResult(verdict=Verdict.CORRECT, message="ok", timing=t, code=big))
            store.record_candidate(c)
            print("DONE", c.id, flush=True)
""")


@pytest.mark.parametrize("after", [1, 4, 9])
def test_sigkill_mid_run_loses_no_finished_candidate_and_indexes_no_partial_one(tmp_path: Path, after: int) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=REPO)
    run = proc.stdout.readline().split()[1]
    done = []
    while len(done) < after:
        line = proc.stdout.readline()
        assert line.startswith("DONE"), line
        done.append(line.split()[1])
    time.sleep(0.003 * after)  # land somewhere inside the next record_candidate
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done += [line.split()[1] for line in proc.stdout.read().splitlines(keepends=True)
             if line.startswith("DONE ") and line.endswith("\n")]  # a line cut by the kill proves nothing
    proc.stdout.close()

    with Store(tmp_path) as s:
        indexed = {r[0]: r[1] for r in s.db.execute("SELECT id, dir FROM candidates")}
        # every finished candidate is on disk and indexed
        assert set(done) <= set(indexed)
        for cid in done:
            assert s.get_candidate(cid).result.verdict == Verdict.CORRECT
        # every index row points at a complete candidate
        for cid, d in indexed.items():
            assert s.get_candidate(cid).code == "x" * 400_000
        # every visible candidate directory is complete; at most one (renamed, not yet committed) is unindexed
        visible = [p for p in (s.candidates_dir / run).iterdir() if p.is_dir() and p.name.startswith("i")
                   and p.name != "iterations"]
        for p in visible:
            assert {f.name for f in p.iterdir()} >= {"candidate.json", "result.json", "code.py", "prompt.md"}
        assert len(visible) - len(indexed) in (0, 1)
        s.sync()
        assert s.db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0] == len(visible)
        assert s.get_run(run).status == "interrupted"
        s.resume_state(run)  # the writer is gone: what it left half-written is swept away
        assert not list((s.candidates_dir / run).glob(".tmp-*"))
        # iterations start at 1 with 3 candidates each; one is complete once the next has begun
        full = len(done) // 3
        assert s.resume_state(run).last_iteration in {k if k > 0 else -1 for k in (full - 1, full)}


def test_two_processes_record_into_one_store_at_once(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys
        from agent.runconfig import RunConfig
        from agent.schema import Candidate, EvalResult, Verdict
        from agent.store import Store

        store = Store(sys.argv[1])
        run = store.create_run(RunConfig(), gpu="h100", device="cuda")
        for i in range(1, 26):
            store.record_candidate(Candidate(id=store.candidate_id(run, 1, i), run_id=run, iteration=1, index=i,
                                             stage="tuning", result=EvalResult(verdict=Verdict.INCORRECT, message="x")))
        store.finish_run(run)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=REPO) for _ in range(2)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    with Store(tmp_path) as s:
        runs = s.list_runs()
        assert len(runs) == 2 and all(r.candidates == 25 and r.status == "finished" for r in runs)


def test_a_lock_sqlite_will_not_wait_for_is_waited_for_by_the_store() -> None:
    from agent.store.index import when_unlocked

    answers = iter([sqlite3.OperationalError("database is locked")] * 3 + ["wal"])

    def pragma() -> str:
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    assert when_unlocked(pragma) == "wal"


def test_a_lock_that_never_clears_and_other_errors_still_raise() -> None:
    from agent.store.index import when_unlocked

    def locked() -> None:
        raise sqlite3.OperationalError("database is locked")

    def readonly() -> None:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    t0 = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        when_unlocked(locked, wait_s=0.2)
    assert 0.1 < time.monotonic() - t0 < 1.0
    t0 = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        when_unlocked(readonly)
    assert time.monotonic() - t0 < 0.1


def test_eight_processes_opening_one_fresh_store_at_once_all_get_it(tmp_path: Path) -> None:
    script = "import sys\nfrom agent.store import Store\nfrom agent.runconfig import RunConfig\n" \
             "Store(sys.argv[1]).create_run(RunConfig(), gpu='h100', device='cuda')\n"
    for attempt in range(3):
        root = tmp_path / str(attempt)
        procs = [subprocess.Popen([sys.executable, "-c", script, str(root)], cwd=REPO, stderr=subprocess.PIPE)
                 for _ in range(8)]
        errors = [p.communicate(timeout=60)[1].decode() for p in procs]
        assert [p.returncode for p in procs] == [0] * 8, errors
        with Store(root) as s:
            assert len(s.list_runs()) == 8


# ---------------------------------------------------------------- the search's records (issue 18)


def test_a_candidates_parent_idea_and_finding_and_an_iterations_groups_survive_a_reindex(store: Store) -> None:
    from agent.schema import Group

    run = new_run(store, search="beam")
    groups = [Group(parent=None, stage="memory-fusion", k=2, prompt="first"),
              Group(parent=f"{run}-i0-c0", stage="tuning", k=1, prompt="second")]
    store.record_iteration(run, 1, "memory-fusion", "first", "requested", None, groups)
    c = candidate(store, run, 1, 1, result()).model_copy(update={"parent": f"{run}-i0-c0", "idea": "split rows",
                                                                 "finding": "small-grid"})
    store.record_candidate(c)
    for s in (store, Store(store.root)):
        if s is not store:
            s.reindex()
        got = s.get_candidate(c.id)
        assert (got.parent, got.idea, got.finding) == (f"{run}-i0-c0", "split rows", "small-grid")
        [it] = s.iterations(run)
        assert it.groups == groups and it.plan(3) == groups
        assert s.leaderboard(run=run)[0].parent == f"{run}-i0-c0"


def test_an_iteration_recorded_before_groups_reads_as_one_group_of_its_prompt_and_best(store: Store) -> None:
    run = new_run(store)
    it = store.record_iteration(run, 1, "memory-fusion", "the prompt", "requested", f"{run}-i0-c0")
    [g] = it.plan(4)
    assert (g.parent, g.stage, g.k, g.prompt) == (f"{run}-i0-c0", "memory-fusion", 4, "the prompt")


def test_a_stopped_run_keeps_why_in_its_file_and_its_index_row(store: Store) -> None:
    run = new_run(store)
    store.finish_run(run, "interrupted", "stopped by SIGTERM")
    assert store.get_run(run).stop_reason == "stopped by SIGTERM"
    store.reindex()  # rebuilt from run.json alone
    assert store.get_run(run).stop_reason == "stopped by SIGTERM"
