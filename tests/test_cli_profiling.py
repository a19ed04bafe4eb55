"""`agent ncu`, `agent prompts`, `agent replay` (either of the two) and `agent profile` as a user runs them (real subprocesses, the saved H100 reports)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "ncu"
STAGE_REPORT = DATA / "seed_h100_metrics.ncu-rep"
FULL_REPORT = DATA / "seed_h100_full.ncu-rep"
KERNEL = "fused_multiply_gap_kernel_optimized"
SEED_FIVE = [
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "launch__grid_size",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
]


def agent(*args: str, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "COLUMNS": "200", **(env or {})}, timeout=120)


# ---------------------------------------------------------------- replay


def test_replay_table_shows_the_kernel_its_metrics_and_the_bottleneck():
    r = agent("ncu", STAGE_REPORT)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert KERNEL in out and "NVIDIA H100 80GB HBM3" in out
    assert "16×2×1 × 128×1×1" in out
    assert "23.51" in out and "685.8 µs" in out and "2.52" in out
    assert "bottleneck: latency-bound: grid 32 blocks on 132 SMs, DRAM 23.5 %" in out


def test_replay_of_a_full_report_lists_the_guided_analysis_rules():
    r = agent("ncu", FULL_REPORT)
    assert r.returncode == 0, r.stderr
    assert "guided analysis" in r.stdout and "Small Grid" in r.stdout and "LaunchConfiguration" in r.stdout
    assert "23.71" in r.stdout  # the stage's DRAM metric, answered by its full-set alias


def test_replay_json_is_kernel_to_metrics_plus_rules():
    stage = json.loads(agent("ncu", STAGE_REPORT, "--format", "json").stdout)
    assert list(stage) == [KERNEL]
    assert stage[KERNEL]["launch__grid_size"] == 32
    assert stage[KERNEL]["gpu__time_duration.sum"] == 685824
    assert list(stage[KERNEL])[:5] == SEED_FIVE

    full = json.loads(agent("ncu", FULL_REPORT, "--format", "json").stdout)
    assert set(full) == {KERNEL, "rules"}
    rules = full["rules"][KERNEL]
    assert {"rule", "title", "kind", "message", "estimated_speedup_pct"} == set(rules[0])
    assert any(x["rule"] == "LaunchConfiguration" and "32 blocks" in x["message"] for x in rules)


def test_replay_prompt_is_exactly_the_block_the_stage_prompt_contains():
    from agent import prompts
    from agent.catalog import load_catalog
    from agent.ncu import read_report, stage_metric_set
    from agent.stages import get_stage

    stage = get_stage("memory-fusion")
    profile = read_report(STAGE_REPORT, stage_metric_set(stage))
    prompt = prompts.render(prompts.PromptInput(stage=stage, gpu=load_catalog()[0], code="pass\n",
                                                metrics=profile.table()))
    r = agent("ncu", STAGE_REPORT, "--format", "prompt")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("[NCU PROFILING METRICS]\n{\n") and r.stdout in prompt
    assert '"dram__throughput.avg.pct_of_peak_sustained_elapsed": 23.51' in r.stdout
    assert '"launch__grid_size": 32' in r.stdout and "gpu__time_duration" not in r.stdout


def test_replay_diff_shows_before_after_and_direction():
    r = agent("ncu", STAGE_REPORT, "--diff", FULL_REPORT)
    assert r.returncode == 0, r.stderr
    assert "685.8 µs" in r.stdout and "680.0 µs" in r.stdout and "-0.8 %" in r.stdout and "same" in r.stdout

    deltas = json.loads(agent("ncu", STAGE_REPORT, "--diff", FULL_REPORT, "--format", "json").stdout)
    dur = next(d for d in deltas if d["metric"] == "gpu__time_duration.sum")
    assert (dur["before"], dur["after"], dur["delta"], dur["direction"]) == (685824, 680032, -5792, "same")
    assert {d["kernel"] for d in deltas} == {KERNEL}


@pytest.mark.parametrize("make", ["missing", "text", "truncated", "directory"])
def test_replay_of_a_bad_file_is_one_red_line_and_exit_2(tmp_path, make):
    path = tmp_path / "bad.ncu-rep"
    if make == "directory":
        path.mkdir()
    elif make == "text":
        path.write_text("not a report\n")
    elif make == "truncated":
        data = STAGE_REPORT.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    r = agent("ncu", path)
    assert r.returncode == 2
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("error:")
    assert {"missing": "no such report", "text": "not an Nsight Compute report", "truncated": "truncated",
            "directory": "is a directory, not a report"}[make] in r.stderr


def test_replay_reads_a_saved_report_as_a_command_of_its_own_with_no_deprecation_note():
    """Before: a yellow note on every use saying `agent replay` was the old spelling, to go in a later release."""
    r = agent("replay", STAGE_REPORT, "--format", "prompt")
    assert r.returncode == 0 and r.stdout.startswith("[NCU PROFILING METRICS]")
    assert r.stderr == ""
    assert r.stdout == agent("ncu", STAGE_REPORT, "--format", "prompt").stdout
    listed = agent("--help").stdout
    [line] = [x for x in listed.splitlines() if x.strip().startswith("replay ")]
    assert "old" not in line and "saved" in line, line
    assert "old spelling" not in agent("replay", "--help").stdout


def test_ncus_diagnosis_lists_the_root_causes_by_gain_then_where_the_kernel_sits_then_ncus_rules():
    """Before: "most valuable first", but ncu's 98 % estimate was the seventh row, below findings with none; then
    (issue 37) the roofline's distance to the roof competed with the causes' gains, and symptoms with their causes."""
    r = agent("ncu", FULL_REPORT, "--format", "diagnosis")
    assert r.returncode == 0, r.stderr
    rows = []
    for row in r.stdout.splitlines():
        cells = [c.strip() for c in row.split("│")]
        if len(cells) > 2 and cells[1] and not cells[1].startswith("finding"):  # a finding's first line
            rows.append((cells[1], cells[-2]))
    causes = [(k, float(g.rstrip(" %"))) for k, g in rows if not k.startswith(("↳", "ncu:")) and g != "–"]
    assert [k for k, _ in causes] == ["small-grid", "spills"] and causes[0][1] > causes[1][1]
    assert all(g == "" for k, g in rows if k.startswith("↳"))  # a symptom folded under its cause: no gain of its own
    kinds = [k for k, _ in rows]
    assert kinds.index("spills") < kinds.index("memory-bound") < kinds.index("ncu:HighPipeUtilization")
    assert dict(rows)["memory-bound"] == "–" and dict(rows)["ncu:HighPipeUtilization"] == "ncu 98 %"
    assert "root causes by estimated gain" in r.stdout


def test_replay_of_an_unknown_stage_names_the_choices():
    r = agent("ncu", STAGE_REPORT, "--stage", "no-such-stage")
    assert r.returncode == 2 and "memory-fusion" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- profile (with a fake ncu)

_FAKE = '''
import json, shutil, sys
argv = sys.argv[1:]
o = argv.index("-o")
job = json.load(open(argv[-1]))
json.dump({"mode": "profile", "ok": True, "phase": "done"}, open(job["result_path"], "w"))
shutil.copyfile(REPORT, argv[o + 1] + ".ncu-rep")
'''


@pytest.fixture
def fake_bin():
    # under /var/tmp: the sandbox gives ncu a private /tmp
    d = Path(tempfile.mkdtemp(prefix="agent-fake-ncu-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None))
    shutil.copyfile(STAGE_REPORT, d / "r.ncu-rep")
    (d / "ncu").write_text(f"#!{sys.executable}\nREPORT = {str(d / 'r.ncu-rep')!r}\n{_FAKE}")
    (d / "ncu").chmod(0o755)
    d.chmod(0o755)  # an installed ncu is world-readable: the sandboxed worker runs unprivileged
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_profile_saves_the_report_and_json_and_prints_the_table(tmp_path, fake_bin):
    answer = tmp_path / "answer.md"
    answer.write_text("Here is a faster kernel:\n\n```python\n" + (REPO / "agent/problems/gap44_start.py").read_text() + "```\n")
    r = agent("profile", answer, "--problem", "gap44", "--stage", "memory-fusion", "--timeout", "60",
              env={"PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}"}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = tmp_path / "profiles" / "adhoc" / "answer.ncu-rep"
    assert report.is_file() and report.with_suffix(".json").is_file()
    assert KERNEL in r.stdout and "latency-bound" in r.stdout


def test_profile_of_a_file_without_code_is_a_user_error(tmp_path):
    prose = tmp_path / "prose.txt"
    prose.write_text("I could not write a kernel this time.\n")
    r = agent("profile", prose, cwd=tmp_path)
    assert r.returncode == 2 and "ModelNew" in r.stderr and len(r.stderr.strip().splitlines()) == 1
