"""agent.harness.preflight: a worker's failed import is the harness's error only when the harness's own imports fail
behind the wall; an answer or a problem file that imports something missing (or says it did) is judged as before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent.harness.preflight import suspect, verify

REPO = Path(__file__).resolve().parent.parent
CORRECT = Path(__file__).resolve().parent / "candidates" / "correct.py"


def _eval(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", "eval", *args, "--device", "cpu", "--no-timing"],
                          capture_output=True, text=True, cwd=cwd, timeout=300, env={"PATH": "/usr/bin:/bin",
                                                                                      "NO_COLOR": "1", "HOME": str(cwd)})


def test_import_failures_are_recognised_in_what_a_worker_wrote():
    assert suspect("ModuleNotFoundError: No module named 'pydantic'")
    assert suspect("ImportError: cannot import name 'x' from 'y'")
    assert not suspect("RuntimeError: shape mismatch")


def test_the_harness_imports_behind_the_wall_here():
    verify("cpu")  # raises HarnessError where they fail


@pytest.mark.slow
def test_an_answer_that_fakes_a_missing_harness_module_is_its_own_runtime_error(tmp_path):
    answer = tmp_path / "fake.py"
    answer.write_text(CORRECT.read_text().replace(
        "import triton\n", "import triton\nraise ModuleNotFoundError(\"No module named 'pydantic'\", name='pydantic')\n",
        1))
    r = _eval(str(answer), cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr  # judged: not correct; not the harness's exit 1
    assert "compile_error" in r.stdout and "candidate line 4" in r.stdout  # loading the module failed, at its line
    assert "sandboxed worker cannot import" not in r.stdout + r.stderr


@pytest.mark.slow
def test_a_problem_file_importing_a_missing_module_is_the_problem_files_fault(tmp_path):
    problem = tmp_path / "needs_einops.py"
    problem.write_text("import agent_missing_module_for_this_test\n"
                       + (REPO / "agent" / "problems" / "gap44.py").read_text())
    r = _eval(str(CORRECT), "--problem", str(problem), cwd=tmp_path)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "sandboxed worker cannot import" not in r.stderr
    assert "agent_missing_module_for_this_test" in r.stderr, r.stderr
