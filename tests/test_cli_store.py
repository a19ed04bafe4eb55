"""Where the store is, through the real CLI: a run says where it creates a new one; every command run in that folder
or below finds it, as git finds its repository; --root and the configured store.root win over what is found; a file
given as the store is one line. And what a CPU run shows its user: no speedups of interpreter timings, and counts
in the singular where there is one.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_run import environment

from agent.runconfig import RunConfig
from agent.store import Store
from agent.store.locate import find_store

CPU_RUN = ("run", "--stage", "memory-fusion", "--device", "cpu", "--gpu", "4090", "--llm", "offline")


def agent(*args: object, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=environment(**env), timeout=300)


def one_line_error(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    for n in needles:
        assert n in p.stderr, p.stderr


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, subprocess.CompletedProcess]:
    """A folder where a user ran one short CPU run with no --root: (folder, run id, the run's output)."""
    folder = tmp_path_factory.mktemp("project")
    p = agent(*CPU_RUN, "--iterations", 1, "--samples", 1, cwd=folder)
    assert p.returncode == 0, p.stderr
    with Store(folder) as store:
        [run] = store.list_runs()
    return folder, run.id, p


@pytest.mark.slow  # one CPU run of the starting kernel and one offline answer
def test_a_run_says_on_one_line_where_it_creates_a_new_store(project):
    folder, _, p = project
    [line] = [x for x in p.stderr.splitlines() if "store" in x]
    assert line.startswith(f"new store in {folder.resolve()} ") and f"--root {folder.resolve()}" in line
    assert (folder / "candidates" / "index.sqlite").is_file()


@pytest.mark.slow
def test_every_command_run_below_the_store_finds_it(project, tmp_path):
    """Before: ./candidates of the working directory only, so `agent runs` one folder down said "No runs recorded"."""
    folder, run, _ = project
    below = folder / "src" / "deeper"
    below.mkdir(parents=True, exist_ok=True)
    listed = json.loads(agent("runs", "--json", cwd=below).stdout)
    assert [r["id"] for r in listed] == [run]
    rows = json.loads(agent("leaderboard", "--all", "--json", cwd=below).stdout)
    assert {r["run"] for r in rows} == {run} and len(rows) == 2
    best = rows[0]["candidate"]
    assert json.loads(agent("show", best, "--json", cwd=below).stdout)["id"] == best
    kernel = tmp_path / "kernel.py"
    assert agent("export", best, "-o", kernel, cwd=below).returncode == 0 and "class ModelNew" in kernel.read_text()
    page = tmp_path / "run.html"
    assert agent("report", run, "-o", page, cwd=below).returncode == 0 and page.stat().st_size > 10_000
    assert "iteration 1 stage memory-fusion" in agent("prompts", run, cwd=below).stdout
    assert not (below / "candidates").exists() and not (folder / "src" / "candidates").exists()


@pytest.mark.slow  # a second CPU run (the starting kernel only)
def test_a_run_below_a_store_records_into_it_and_says_nothing_of_a_new_one(project):
    folder, run, _ = project
    below = folder / "notebooks"
    below.mkdir(exist_ok=True)
    p = agent(*CPU_RUN, "--iterations", 0, "--json", cwd=below)
    assert p.returncode == 0 and "new store" not in p.stderr, p.stderr
    second = json.loads(p.stdout.splitlines()[-1])["run"]
    with Store(folder) as store:
        assert {r.id for r in store.list_runs()} == {run, second}
    assert not (below / "candidates").exists()


def test_the_nearest_store_wins_and_a_flag_or_the_configured_store_wins_over_any_found(tmp_path):
    outer, inner, elsewhere = tmp_path / "outer", tmp_path / "outer" / "inner", tmp_path / "elsewhere"
    ids = {}
    for folder in (outer, inner, elsewhere):
        folder.mkdir(parents=True, exist_ok=True)
        with Store(folder) as s:
            ids[folder] = s.create_run(RunConfig(problem="gap44"), gpu="h100", device="cuda")
    here = inner / "a" / "b"
    here.mkdir(parents=True)

    def listed(*args: object, **env: str) -> list[str]:
        p = agent("runs", "--json", *args, cwd=here, **env)
        assert p.returncode == 0, p.stderr
        return [r["id"] for r in json.loads(p.stdout)]

    assert listed() == [ids[inner]]  # the nearest, as git finds the nearest .git
    assert listed("--root", elsewhere) == [ids[elsewhere]]
    assert listed(AGENT_STORE__ROOT=str(elsewhere)) == [ids[elsewhere]]
    config = tmp_path / "config.toml"
    config.write_text(f'[store]\nroot = "{outer}"\n')
    assert listed(AGENT_CONFIG=str(config)) == [ids[outer]]
    assert listed("--root", elsewhere, AGENT_CONFIG=str(config)) == [ids[elsewhere]]
    shown = json.loads(agent("config", "--json", cwd=here).stdout)["store"]
    assert (shown["root"], shown["source"]) == (str(inner.resolve()), "found")


@pytest.mark.parametrize("command", [("runs",), ("leaderboard",), ("show", "x"), ("export", "x"), ("report", "x"),
                                     ("prompts", "x"), ("replay", "x"), CPU_RUN])
def test_a_file_given_as_the_store_is_one_line_and_exit_2(command, tmp_path):
    """Before: `agent runs --root FILE` said "No runs recorded under FILE/candidates" and exited 0."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a store\n")
    one_line_error(agent(*command, "--root", a_file, cwd=tmp_path), f"--root {a_file}: not a directory")


def test_a_file_configured_as_the_store_is_one_line_naming_where_it_was_set(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a store\n")
    one_line_error(agent("runs", cwd=tmp_path, AGENT_STORE__ROOT=str(a_file)),
                   f"store.root (AGENT_STORE__ROOT) {a_file}: not a directory")
    config = tmp_path / "config.toml"
    config.write_text(f'[store]\nroot = "{a_file}"\n')
    one_line_error(agent("leaderboard", cwd=tmp_path, AGENT_CONFIG=str(config)),
                   f"store.root (config {config}) {a_file}: not a directory")


def test_with_no_store_here_or_above_a_read_says_where_it_looked(tmp_path):
    if find_store(tmp_path) is not None:
        pytest.skip(f"a store lies above the test's folder: {find_store(tmp_path)}")
    p = agent("runs", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == ""
    assert f"No runs recorded under {tmp_path.resolve() / 'candidates'} or any folder above" in p.stdout
    assert not (tmp_path / "candidates").exists()


# ---------------------------------------------------------------- what the CPU run showed


@pytest.mark.slow
def test_a_cpu_runs_progress_shows_no_speedup_and_counts_in_the_singular(project):
    """Before: "0.01× eager" (Triton's interpreter against eager PyTorch) and "1 iterations"."""
    _, _, p = project
    assert "1 iteration × 1 sample, search" in p.stdout and "stopped: completed 1 iteration\n" in p.stdout
    assert "iterations  1 of 1, 2 candidates" in p.stdout
    assert "× eager" not in p.stdout and "speedup n/a (CPU mode)" in p.stdout
    assert "1 iterations" not in p.stdout + p.stderr


@pytest.mark.slow  # evaluates one answer on the CPU
def test_a_cpu_evaluation_shows_no_speedup(project, tmp_path):
    folder, _, _ = project
    kernel = tmp_path / "kernel.py"
    rows = json.loads(agent("leaderboard", "--json", cwd=folder).stdout)
    assert agent("export", rows[0]["candidate"], "-o", kernel, cwd=folder).returncode == 0
    p = agent("eval", kernel, "--problem", "gap44", "--stage", "memory-fusion", "--device", "cpu", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "n/a (CPU mode)" in p.stdout and not re.search(r"\d\.\d\d×", p.stdout), p.stdout  # no "0.01×"
