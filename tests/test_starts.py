"""Iteration 0's answers (agent.starts): the problem's starting kernel, torch.compile's kernels as an answer (GPU
only), or both; `agent run --start`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.errors import HarnessError, UserError
from agent.inductor import start as inductor_start
from agent.problems import load_problem
from agent.starts import Starts

REPO = Path(__file__).resolve().parent.parent
GAP44 = load_problem("gap44")


class Notes:
    """Progress: what the starter said."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.phases: list[str] = []

    def message(self, text: str) -> None:
        self.messages.append(text)

    def phase(self, name: str, detail: str = "", total: int = 0) -> None:
        self.phases.append(name)


def test_problem_start_is_the_problems_starting_kernel_and_nothing_is_said():
    notes = Notes()
    [a] = Starts("problem", "cuda").answers(GAP44, notes)  # type: ignore[arg-type]
    assert (a.text, a.model) == (GAP44.start.read_text(), "start") and notes.messages == []
    assert Starts("problem").answers(load_problem("conv2d_gap_bias_lse"), notes) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("kind, expected", [("both", ["start"]), ("inductor", [])])
def test_in_cpu_mode_the_inductor_start_is_skipped_with_a_notice(kind, expected):
    notes = Notes()
    answers = Starts(kind, "cpu").answers(GAP44, notes)  # type: ignore[arg-type]
    assert [a.model for a in answers] == expected
    assert notes.messages == [f"{inductor_start.CPU_NOTICE}: iteration 0 without it"]


@pytest.mark.parametrize("error", [HarnessError("capturing torch.compile's code for gap44 failed: boom"),
                                   UserError("Inductor start: call() calls `alloc_from_pool`, which ...")])
def test_on_a_gpu_a_failed_capture_or_translation_leaves_the_problems_start_with_a_notice(error, monkeypatch):
    def fail(problem, device, hide=None):
        raise error
    monkeypatch.setattr(inductor_start, "start_from_inductor", fail)
    notes = Notes()

    answers = Starts("both", "cuda").answers(GAP44, notes)  # type: ignore[arg-type]

    assert [a.model for a in answers] == ["start"]
    assert notes.phases == ["capturing"] and notes.messages == [f"no Inductor start: {error.message}"]


def test_on_a_gpu_the_inductor_start_comes_after_the_problems(monkeypatch):
    seen = []

    def fake(problem, device, hide=None):
        seen.append((problem.name, device, hide))
        return "# torch.compile's kernels\n"
    monkeypatch.setattr(inductor_start, "start_from_inductor", fake)

    answers = Starts("both", "cuda", (Path("/store"),)).answers(GAP44, Notes())  # type: ignore[arg-type]

    assert [(a.model, a.text) for a in answers] == [("start", GAP44.start.read_text()),
                                                   ("inductor", "# torch.compile's kernels\n")]
    assert seen == [("gap44", "cuda", [Path("/store")])]


def test_start_from_inductor_refuses_cpu_mode_in_one_line():
    with pytest.raises(UserError, match="no Inductor start in CPU mode"):
        inductor_start.start_from_inductor(GAP44, "cpu")


def test_agent_run_start_inductor_in_cpu_mode_says_so_and_runs_without_iteration_zero(tmp_path):
    r = subprocess.run([sys.executable, "-m", "agent", "run", "--device", "cpu", "--start", "inductor",
                        "--iterations", "0", "--llm", "offline", "--root", str(tmp_path)], cwd=REPO,
                       capture_output=True, text=True, timeout=180, env={**os.environ, "COLUMNS": "200"})

    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert f"{inductor_start.CPU_NOTICE}: iteration 0 without it" in out
    assert "0 candidates" in out and "completed 0 iterations" in out


def test_agent_run_refuses_an_unknown_start():
    r = subprocess.run([sys.executable, "-m", "agent", "run", "--start", "eager"], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "invalid choice: 'eager'" in r.stderr
