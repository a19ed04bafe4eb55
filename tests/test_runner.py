"""agent.harness.runner.run_job: the one way a job runs in the wall. Evaluation, the shared truths, the torch.compile
capture and profiling (ncu wrapping the worker) all go through it; no caller outside the wall builds a sandbox."""

import ast
import sys
from pathlib import Path

import pytest

import agent
from agent.harness.runner import run_job
from agent.harness.wall.sandbox import isolation

REPO = Path(agent.__file__).resolve().parent.parent
namespaces = pytest.mark.skipif(isolation() == "none", reason="unshare is refused on this machine")
# run_sandboxed's callers: the wall itself, run_job, and preflight's probe (a script, not a job)
OWNERS = {"agent/harness/runner.py", "agent/harness/preflight.py"}


@namespaces
def test_a_wrapper_runs_the_worker_inside_the_wall_with_the_added_environment(tmp_path):
    """The profiler's shape: ncu, inside the wall, starts the worker's own command line; here a Python that records
    what it was handed instead."""
    record = "import os, sys; open('wrapped.txt', 'w').write(os.environ['PROBE'] + ' ' + ' '.join(sys.argv[1:]))"
    sb = run_job(tmp_path, tmp_path / "job.json", "cpu", 60, None, [], None,
                 wrap=[sys.executable, "-c", record], env={"PROBE": "seen"})
    assert sb.returncode == 0 and sb.contained, sb.stderr
    said = (tmp_path / "wrapped.txt").read_text().split()
    assert said[0] == "seen"
    assert said[-3:] == ["-m", "agent.harness.worker.main", str(tmp_path / "job.json")]


def calls_run_sandboxed(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "run_sandboxed") or \
                    (isinstance(f, ast.Attribute) and f.attr == "run_sandboxed"):
                return True
    return False


def test_no_caller_outside_the_wall_builds_a_sandbox_by_hand():
    files = [p for p in (REPO / "agent").rglob("*.py") if "wall" not in p.relative_to(REPO / "agent").parts]
    builders = {str(p.relative_to(REPO)) for p in files if calls_run_sandboxed(p)}
    assert builders == OWNERS
