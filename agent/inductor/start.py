"""torch.compile's own kernels as a starting answer (issue 21): what Inductor generates for the problem's Model at
each of its GPU size sets, captured in a sandboxed worker (the harness's "inductor" mode: torch.compile never runs in
the agent's process) and translated into a self-contained ModelNew (agent.inductor.translate), which the loop then
judges like any other answer."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from agent.errors import HarnessError, UserError
from agent.harness.worker.capture import Capture
from agent.schema import ProblemSpec

CPU_NOTICE = "no Inductor start in CPU mode: torch.compile writes Triton kernels only for a GPU"


def start_from_inductor(problem: ProblemSpec, device: str, hide: list[Path] | None = None) -> str:
    """The answer's text: torch.compile's kernels and wrapper for `problem`, captured at its GPU sizes on this
    host's GPU. UserError where there is none (CPU mode) or the code holds what the translation does not know;
    HarnessError where capturing failed."""
    from agent.inductor.translate import translate

    if device != "cuda":
        raise UserError(CPU_NOTICE)
    return translate(capture_problem(problem, hide or []), problem.path.read_text())


def capture_problem(problem: ProblemSpec, hide: list[Path]) -> list[Capture]:
    """One static capture per GPU size set of `problem`, from a sandboxed worker on this host's GPU."""
    from agent.harness.job import RESULT_FILE, prepare_job, read_result
    from agent.harness.judge.verdict import sandbox_failure
    from agent.harness.pipeline import default_gpu_lock
    from agent.harness.runner import run_job
    from agent.harness.settings import settings

    workdir = Path(tempfile.mkdtemp(prefix="agent-inductor-"))
    lock = default_gpu_lock()
    try:
        job = prepare_job(workdir, "inductor", problem, device="cuda", sizes=problem.sizes, trials=[], gpu_lock=lock)
        sb = run_job(workdir, job, "cuda", settings().sandbox.baseline_timeout_s, None, hide, lock)
        res = read_result(workdir / RESULT_FILE)
        if res is None or not res.ok:
            why = res.error.message if res is not None and res.error else sandbox_failure(sb)
            raise HarnessError(f"capturing torch.compile's code for {problem.name} failed: {why}")
        if len(res.captures) != len(problem.sizes):
            raise HarnessError(f"capturing torch.compile's code for {problem.name}: {len(res.captures)} captures "
                               f"for {len(problem.sizes)} size sets")
        return res.captures
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
