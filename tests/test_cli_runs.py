"""`agent leaderboard`, `agent show`, `agent export`: the real CLI in a subprocess over a store built in tmp_path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
from agent.store import DRAM_METRIC, DURATION_METRIC, Store

REPO = Path(__file__).resolve().parent.parent
CODE = "import triton\n\nclass ModelNew:\n    BLOCK = 1024  # [NCU] markup-looking text stays text\n"


def agent(*args: str, cwd: Path | None = None, columns: int = 200) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, cwd=cwd or REPO,
                          env=env, timeout=60)


def record(store: Store, run: str, iteration: int, index: int, verdict: Verdict, ms: float | None = None, *,
           stage: str = "memory-fusion", dram: float | None = None, tokens: int = 0, code: str | None = CODE,
           eager_ms: float = 1.76, meaningful: bool = True) -> str:
    timing = None
    if ms is not None:
        timing = Timing(candidate_ms=ms, candidate_spread_pct=0.8, eager_ms=eager_ms, compile_ms=0.56,
                        speedup_vs_eager=eager_ms / ms, speedup_vs_compile=0.56 / ms, repeats=200,
                        meaningful=meaningful)
    profile = None
    if dram is not None:
        profile = Profile(gpu="h100", kernels={"gap_kernel": KernelProfile(
            name="gap_kernel", metrics={DURATION_METRIC: 180_000, DRAM_METRIC: dram, "launch__grid_size": 4096})},
            bottleneck=Bottleneck(kind="memory-bound", reason=f"DRAM {dram} % of peak"))
    c = Candidate(
        id=store.candidate_id(run, iteration, index), run_id=run, iteration=iteration, index=index, stage=stage,
        code=code, prompt="You are an expert in Triton kernels. [GPU] H100\n",
        answer=Answer(text=f"Here is the kernel.\n```python\n{code}```", model="gpt-4o",
                      usage=Usage(prompt_tokens=tokens, completion_tokens=tokens // 10, cost_usd=tokens * 1e-6)),
        result=EvalResult(verdict=verdict, message="max error 2.1e-06 (tolerance 1e-04)" if ms else
                          "line 4: output mismatch, max error 0.5", code=code, device="cuda",
                          checks=[Check(size="full", shapes=[[128, 64, 32, 32]], distribution="normal", error=2.1e-6,
                                        tolerance=1e-4, passed=verdict == Verdict.CORRECT)],
                          timing=timing),
        profile=profile,
    )
    store.record_candidate(c)
    return c.id


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("store")
    with Store(root) as s:
        a = s.create_run(RunConfig(problem="gap44"), gpu="h100", device="cuda")
        s.record_iteration(a, 1, "memory-fusion", "prompt", "requested", None)
        ids = {
            "slow": record(s, a, 1, 1, Verdict.CORRECT, 1.60, tokens=2000),
            "fast": record(s, a, 1, 2, Verdict.CORRECT, 0.22, dram=91.3, tokens=3000),
            "wrong": record(s, a, 1, 3, Verdict.INCORRECT, tokens=1000),
            "nocode": record(s, a, 1, 4, Verdict.NO_CODE, code=None),
        }
        b = s.create_run(RunConfig(problem="other"), gpu="h100", device="cuda")
        s.record_iteration(b, 1, "tuning", "prompt", "requested", None)
        ids["other"] = record(s, b, 1, 1, Verdict.CORRECT, 0.80, stage="tuning")
        ids["run_a"], ids["run_b"] = a, b
    return root, ids


def test_leaderboard_on_an_empty_root_says_so(tmp_path: Path) -> None:
    r = agent("leaderboard", "--root", str(tmp_path))
    assert r.returncode == 0 and "No runs recorded" in r.stdout and r.stderr == ""
    assert not (tmp_path / "candidates").exists()
    r = agent("leaderboard", "--json", "--root", str(tmp_path))
    assert r.returncode == 0 and json.loads(r.stdout) == []


def test_leaderboard_json_ranks_correct_candidates_by_time_within_each_problem(root) -> None:
    path, ids = root
    r = agent("leaderboard", "--json", "--root", str(path))
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["candidate"] for row in rows] == [ids["fast"], ids["slow"], ids["other"]]
    assert [(row["problem"], row["rank"]) for row in rows] == [("gap44", 1), ("gap44", 2), ("other", 1)]
    top = rows[0]
    for field in ("candidate", "run", "stage", "verdict", "candidate_ms", "speedup_vs_eager", "speedup_vs_compile"):
        assert field in top
    assert (top["run"], top["stage"], top["verdict"], top["candidate_ms"], top["dram_pct"]) == (
        ids["run_a"], "memory-fusion", "correct", 0.22, 91.3)
    assert top["speedup_vs_eager"] == pytest.approx(8.0) and top["speedup_vs_compile"] == pytest.approx(0.56 / 0.22)
    assert top["tokens"] == 3300 and top["rank"] == 1


def test_leaderboard_filters_and_all(root) -> None:
    path, ids = root
    by = lambda *a: [row["candidate"] for row in json.loads(agent("leaderboard", "--json", "--root", str(path), *a).stdout)]  # noqa: E731
    assert by("--problem", "other") == [ids["other"]]
    assert by("--run", ids["run_a"]) == [ids["fast"], ids["slow"]]
    assert by("--stage", "tuning") == [ids["other"]]
    assert by("--limit", "1") == [ids["fast"]]
    every = by("--all", "--run", ids["run_a"])
    assert every[:2] == [ids["fast"], ids["slow"]] and set(every[2:]) == {ids["wrong"], ids["nocode"]}


def test_leaderboard_table_shows_the_columns(root) -> None:
    path, ids = root
    r = agent("leaderboard", "--root", str(path))
    assert r.returncode == 0, r.stderr
    for text in ("#", "candidate", "run", "stage", "verdict", "device ◆", "latency", "launches", "vs eager",
                 "vs compile", "DRAM", "tokens",
                 "cost", ids["fast"], ids["run_a"], "0.220 ms", "8.00×", "2.55×", "91.3 %", "3,300", "correct"):
        assert text in r.stdout, text
    assert ids["wrong"] not in r.stdout
    assert ids["wrong"] in agent("leaderboard", "--all", "--root", str(path)).stdout


def test_leaderboard_fits_a_narrow_terminal_with_short_ids(root) -> None:
    path, ids = root
    r = agent("leaderboard", "--root", str(path), columns=80)
    short = ids["fast"].split("-", 2)[2]  # '<tag>-i1-c2': what the compact table shows, and show accepts
    assert r.returncode == 0 and short in r.stdout and "8.00×" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    assert agent("show", short, "--json", "--root", str(path)).returncode == 0


def test_leaderboard_with_no_match_is_a_friendly_line(root) -> None:
    path, _ = root
    r = agent("leaderboard", "--problem", "nothing", "--root", str(path))
    assert r.returncode == 0 and "No correct candidates for problem nothing" in r.stdout


def test_leaderboard_ranks_by_time_not_by_a_ratio_to_a_re_timed_eager(tmp_path: Path) -> None:
    """On the CPU eager is timed again every round: before, the 44.5 ms candidate (2.25x its round's eager) ranked
    above the 40.2 ms one (1.99x its own)."""
    with Store(tmp_path) as s:
        run = s.create_run(RunConfig(problem="gap44"), gpu="h100", device="cuda")
        s.record_iteration(run, 1, "memory-fusion", "prompt", "requested", None)
        slow = record(s, run, 1, 1, Verdict.CORRECT, 44.5, eager_ms=100.0)
        fast = record(s, run, 1, 2, Verdict.CORRECT, 40.2, eager_ms=80.0)
    r = agent("leaderboard", "--json", "--root", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert [row["candidate"] for row in json.loads(r.stdout)] == [fast, slow]


def test_on_a_tie_the_leaderboard_and_the_runs_summary_name_the_same_best_and_failures_say_why(tmp_path: Path) -> None:
    """Before: two candidates at the same time came in the index's order, so the run summary's best and the
    leaderboard's first row could differ; `--all` showed a failure's verdict but not why."""
    with Store(tmp_path) as s:
        run = s.create_run(RunConfig(problem="gap44"), gpu="h100", device="cuda")
        s.record_iteration(run, 1, "memory-fusion", "prompt", "requested", None)
        record(s, run, 1, 1, Verdict.CORRECT, 0.5)
        best = record(s, run, 1, 2, Verdict.CORRECT, 0.5)
        record(s, run, 1, 3, Verdict.INCORRECT)
        s.set_best(run, best)
        s.finish_run(run)
    rows = json.loads(agent("leaderboard", "--json", "--root", str(tmp_path)).stdout)
    assert rows[0]["candidate"] == best
    [summary] = json.loads(agent("runs", "--json", "--root", str(tmp_path)).stdout)
    assert summary["best_row"]["candidate"] == best
    table = agent("leaderboard", "--all", "--root", str(tmp_path))
    assert table.returncode == 0 and "why" in table.stdout and "line 4: output mismatch" in table.stdout
    every = json.loads(agent("leaderboard", "--all", "--json", "--root", str(tmp_path)).stdout)
    assert [r["rank"] for r in every] == [1, 2, None]  # before: the failure was numbered 1 again


def test_show_prints_verdict_checks_timing_metrics_and_code_and_the_prompt_and_response_when_asked(root) -> None:
    path, ids = root
    r = agent("show", ids["fast"], "--root", str(path))
    assert r.returncode == 0, r.stderr
    for text in (ids["fast"], "correct", "max error 2.1e-06", "checks", "timing", "0.220 ms", "torch.compile",
                 DRAM_METRIC, "91.3", "memory-bound", "BLOCK = 1024", "[NCU] markup-looking text stays text"):
        assert text in r.stdout, text
    # before: every show printed the whole prompt and response (441 lines for a real run)
    assert "You are an expert" not in r.stdout and "Here is the kernel." not in r.stdout
    full = agent("show", ids["fast"], "--full", "--root", str(path)).stdout
    assert "You are an expert in Triton kernels. [GPU] H100" in full and "Here is the kernel." in full
    assert "Here is the kernel." in agent("show", ids["fast"], "--response", "--root", str(path)).stdout


def test_show_on_a_terminal_pages_a_view_taller_than_the_screen(root, tmp_path) -> None:
    """Through $PAGER, as git does; a pipe (above) gets plain text."""
    import pty

    path, ids = root
    paged = tmp_path / "paged.txt"
    main, sub = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "LINES": "20", "PAGER": f"cat > {paged}", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    p = subprocess.run([sys.executable, "-m", "agent", "show", ids["fast"], "--full", "--root", str(path)],
                       stdin=sub, stdout=sub, stderr=subprocess.PIPE, env=env, cwd=REPO, timeout=60)
    os.close(sub)
    os.close(main)
    assert p.returncode == 0, p.stderr
    text = paged.read_text()
    assert ids["fast"] in text and "Here is the kernel." in text


def test_show_json_is_the_candidate(root) -> None:
    path, ids = root
    r = agent("show", ids["wrong"], "--json", "--root", str(path))
    c = Candidate.model_validate_json(r.stdout)
    assert c.id == ids["wrong"] and c.result.verdict == Verdict.INCORRECT


def test_export_writes_the_code(root, tmp_path: Path) -> None:
    path, ids = root
    out = tmp_path / "sub" / "kernel.py"
    r = agent("export", ids["fast"], "-o", str(out), "--root", str(path))
    assert r.returncode == 0, r.stderr
    assert out.read_text() == CODE and str(out) in r.stderr
    assert agent("export", ids["fast"], "--root", str(path)).stdout == CODE


@pytest.mark.parametrize("argv", [
    ["show", "20990101-000000-dead-i1-c1"],
    ["export", "nope", "-o", "/tmp/never.py"],
    ["leaderboard", "--run", "20990101"],
])
def test_unknown_ids_exit_2_with_one_line(root, argv: list[str]) -> None:
    path, _ = root
    r = agent(*argv, "--root", str(path))
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("error: unknown")


def test_unknown_candidate_in_an_empty_root_exits_2(tmp_path: Path) -> None:
    r = agent("show", "x", "--root", str(tmp_path))
    assert r.returncode == 2 and "no runs under" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_export_of_a_candidate_without_code_exits_2(root) -> None:
    path, ids = root
    r = agent("export", ids["nocode"], "--root", str(path))
    assert r.returncode == 2 and "has no code" in r.stderr


# ---------------------------------------------------------------- agent runs


def _copy(root: Path, tmp_path: Path) -> Path:
    import shutil

    dest = tmp_path / "store"
    shutil.copytree(root, dest)
    return dest


def test_runs_lists_every_run_with_its_status_problem_and_best(root) -> None:
    path, ids = root
    r = agent("runs", "--root", str(path))
    assert r.returncode == 0, r.stderr
    for text in (ids["run_a"], ids["run_b"], "gap44", "other", "memory-fusion", "0.220 ms"):
        assert text in r.stdout, r.stdout
    rows = json.loads(agent("runs", "--json", "--root", str(path)).stdout)
    assert [row["id"] for row in rows] == sorted([ids["run_a"], ids["run_b"]], reverse=True)
    best = {row["id"]: row["best_row"]["candidate"] for row in rows}
    assert best[ids["run_a"]] == ids["fast"] and rows[0]["candidates"] >= 1


def test_runs_rm_deletes_a_run_files_and_rows_and_prune_the_failed_ones(root, tmp_path) -> None:
    src, ids = root
    path = _copy(src, tmp_path)
    running = agent("runs", "rm", ids["run_b"], "--root", str(path))  # its process (this one) is alive
    assert running.returncode == 2 and "still running" in running.stderr
    with Store(path) as s:
        s.finish_run(ids["run_a"])
        s.finish_run(ids["run_b"])
    r = agent("runs", "rm", ids["run_b"][:-1], "--root", str(path))  # a unique prefix is enough
    assert r.returncode == 0 and "removed 1 run" in r.stdout, r.stderr
    assert not (path / "candidates" / ids["run_b"]).exists()
    assert [x["id"] for x in json.loads(agent("runs", "--json", "--root", str(path)).stdout)] == [ids["run_a"]]
    assert ids["other"] not in agent("leaderboard", "--root", str(path)).stdout
    with Store(path) as s:
        s.finish_run(ids["run_a"], "failed")
    r = agent("runs", "prune", "--root", str(path))
    assert r.returncode == 0 and "removed 1 run" in r.stdout
    assert json.loads(agent("runs", "--json", "--root", str(path)).stdout) == []
    empty = agent("runs", "--root", str(path))  # before: an empty table once every run was removed
    assert empty.returncode == 0 and "No runs recorded" in empty.stdout and "┃" not in empty.stdout
    bad = agent("runs", "rm", "no-such-run", "--root", str(path))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_a_broken_run_json_hides_only_its_own_run_and_reindex_names_it(root, tmp_path) -> None:
    src, ids = root
    path = _copy(src, tmp_path)
    (path / "candidates" / ids["run_b"] / "run.json").write_text("{not json")
    for f in (path / "candidates").glob("index.sqlite*"):
        f.unlink()  # the index gone too: everything is read from the files again
    r = agent("leaderboard", "--json", "--root", str(path))
    assert r.returncode == 0, r.stderr
    assert [row["candidate"] for row in json.loads(r.stdout)] == [ids["fast"], ids["slow"]]  # run a still there
    assert f"{ids['run_b']}/run.json" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = agent("runs", "reindex", "--root", str(path))
    assert r.returncode == 0 and "reindexed 1 run," in r.stdout and f"{ids['run_b']}/run.json" in r.stdout, r.stdout


def _read_only(path: Path, *args: str, inside: bool = False) -> subprocess.CompletedProcess:
    """`agent ARGS` with `path` mounted read-only (a private mount namespace: only this command sees it so);
    `inside`: run from within `path` (the store is the working directory), this checkout's agent still imported."""
    import shlex
    import shutil

    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare to mount a folder read-only")
    p = shlex.quote(str(path))
    cmd = (f"mount --bind {p} {p} && mount -o remount,ro,bind {p} && touch {p}/probe 2>/dev/null && exit 99; "
           + (f"cd {p} && " if inside else "")
           + f"exec {shlex.quote(sys.executable)} -m agent {' '.join(shlex.quote(a) for a in args)}")
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    if inside:
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    r = subprocess.run(["unshare", "-m", "sh", "-c", cmd], capture_output=True, text=True, cwd=REPO, env=env,
                       timeout=60)
    if r.returncode == 99:
        pytest.fail("the folder was still writable")
    if "mount" in r.stderr and r.returncode != 0 and "error:" not in r.stderr:
        pytest.skip(f"cannot mount here: {r.stderr.strip()}")
    return r


@pytest.mark.parametrize("index", ["kept", "lost"])
def test_read_only_commands_read_a_read_only_store_and_run_says_it_cannot_write_there(root, tmp_path, index) -> None:
    src, ids = root
    path = _copy(src, tmp_path)
    with Store(path) as s:
        s.finish_run(ids["run_a"])
        s.finish_run(ids["run_b"])
    if index == "lost":
        for f in (path / "candidates").glob("index.sqlite*"):
            f.unlink()
    before = sorted(p.name for p in (path / "candidates").iterdir())
    r = _read_only(path, "leaderboard", "--json", "--root", str(path))
    assert r.returncode == 0, r.stderr
    assert [row["candidate"] for row in json.loads(r.stdout)] == [ids["fast"], ids["slow"], ids["other"]]
    r = _read_only(path, "show", ids["fast"], "--json", "--root", str(path))
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == ids["fast"], r.stderr
    r = _read_only(path, "runs", "--json", "--root", str(path))
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 2, r.stderr
    r = _read_only(path, "run", "--device", "cpu", "--root", str(path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "read-only" in r.stderr, r.stderr
    assert sorted(p.name for p in (path / "candidates").iterdir()) == before  # nothing was written


def test_a_read_only_working_directory_is_read_as_the_store_when_no_root_is_given(root, tmp_path) -> None:
    """A shared results folder one `cd`s into: before, `agent leaderboard` there was an internal error, exit 1."""
    src, ids = root
    path = _copy(src, tmp_path)
    with Store(path) as s:
        s.finish_run(ids["run_a"])
        s.finish_run(ids["run_b"])
    r = _read_only(path, "leaderboard", "--json", inside=True)
    assert r.returncode == 0, r.stderr
    assert [row["candidate"] for row in json.loads(r.stdout)] == [ids["fast"], ids["slow"], ids["other"]]
    r = _read_only(path, "show", ids["fast"], "--json", inside=True)
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == ids["fast"], r.stderr


def test_an_unknown_stage_filter_is_one_line_naming_the_stages(root) -> None:
    path, _ = root
    r = agent("leaderboard", "--stage", "nope", "--root", str(path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "memory-fusion" in r.stderr, r.stderr
    assert r.stdout == ""


def test_a_run_is_found_by_the_short_tag_the_tables_show(root, tmp_path) -> None:
    src, ids = root
    path = _copy(src, tmp_path)
    tag = ids["run_a"].rsplit("-", 1)[1]
    r = agent("runs", "--json", "--root", str(path))
    assert r.returncode == 0
    r = agent("prompts", tag, "--root", str(path))
    assert r.returncode == 0 and "iteration 1 stage memory-fusion" in r.stdout, r.stderr
    r = agent("replay", tag, "--root", str(path))  # a run id: its prompts, as `agent prompts` shows them
    assert r.returncode == 0 and "iteration 1 stage memory-fusion" in r.stdout and r.stderr == "", r.stderr
    r = agent("leaderboard", "--run", tag, "--json", "--root", str(path))
    assert r.returncode == 0 and {row["run"] for row in json.loads(r.stdout)} == {ids["run_a"]}, r.stderr


def test_show_sass_prints_a_candidates_sass_from_its_saved_report_and_says_when_there_is_none(tmp_path) -> None:
    best = Path(__file__).parent / "data" / "ncu" / "memory_fusion_best_h100.ncu-rep"
    with Store(tmp_path) as s:
        run = s.create_run(RunConfig(problem="gap44"), gpu="h100", device="cuda")
        s.record_iteration(run, 1, "memory-fusion", "prompt", "requested", None)
        profiled = record(s, run, 1, 1, Verdict.CORRECT, 0.5)
        bare = record(s, run, 1, 2, Verdict.CORRECT, 0.6)
        shutil.copy(best, s.profile_path(run, profiled))
    r = agent("show", profiled, "--sass", "--root", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "gap_row_kernel: hottest 10 of" in r.stdout and "long_scoreboard" in r.stdout and "FADD" in r.stdout
    r = agent("show", bare, "--sass", "--root", str(tmp_path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "no saved ncu report" in r.stderr


def test_cpu_mode_speedups_read_not_applicable_in_every_table(tmp_path: Path) -> None:
    """Before: "0.01×" beside interpreter timings in the leaderboard, `agent runs` and `agent show`."""
    with Store(tmp_path) as s:
        run = s.create_run(RunConfig(problem="gap44", device="cpu"), gpu="4090", device="cpu")
        s.record_iteration(run, 1, "memory-fusion", "prompt", "requested", None)
        cpu = record(s, run, 1, 1, Verdict.CORRECT, 25.0, eager_ms=0.25, meaningful=False)
    for args in (("leaderboard",), ("runs",), ("show", cpu, "--no-pager")):
        out = agent(*args, "--root", str(tmp_path)).stdout
        assert "n/a (CPU mode)" in out and "0.01×" not in out, (args, out)
    gpu = tmp_path / "gpu"
    with Store(gpu) as s:  # a GPU timing keeps its figure
        run = s.create_run(RunConfig(problem="gap44"), gpu="h100", device="cuda")
        s.record_iteration(run, 1, "memory-fusion", "prompt", "requested", None)
        record(s, run, 1, 1, Verdict.CORRECT, 0.22)
    out = agent("leaderboard", "--root", str(gpu)).stdout
    assert "8.00×" in out and "n/a" not in out
