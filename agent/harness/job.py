"""What the parent tells a worker process (WorkerJob, a JSON file) and what the worker answers (WorkerResult).

Paths in a job are absolute and lie inside the sandbox's workdir, which the sandbox makes visible at the same
path. Tensors (truths, candidate outputs) travel in `.pt` files beside the result JSON.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field

from agent.harness.settings import TimingSettings, settings
from agent.schema import Model, ProblemSpec, SizeSet

Mode = Literal["evaluate", "reference", "baseline", "profile"]
Device = Literal["cuda", "cpu"]

CANDIDATE_FILE = "candidate.py"
PROBLEM_FILE = "problem.py"
JOB_FILE = "job.json"
RESULT_FILE = "result.json"


class WorkerJob(Model):
    mode: Mode
    problem_path: Path = Field(description="the problem file (a copy inside the workdir)")
    candidate_path: Path | None = Field(default=None, description="the candidate's code (evaluate, profile)")
    sizes: list[SizeSet] = Field(description="size sets to run; the first is the timed (and profiled) size")
    device: Device = "cuda"
    seed: int = 0
    distributions: list[str] = Field(default_factory=lambda: list(settings().validation.distributions))
    time_it: bool = Field(default=False, description="evaluate: time the candidate after validation")
    time_eager: bool = Field(default=False, description="reference: also time eager (CPU mode's cheap baseline)")
    timing: TimingSettings = Field(default_factory=lambda: settings().timing)
    result_path: Path
    outputs_dir: Path = Field(description="where the worker writes tensor files")
    profile_warmup: int = 3
    nvtx_range: str = "agent_profile"


class WorkerError(Model):
    kind: Literal["compile_error", "runtime_error"]
    phase: str = Field(description="import | build | validate | timing | reference | baseline")
    message: str
    line: int | None = Field(default=None, description="innermost line of the candidate file involved")


class TrialRecord(Model):
    """One validation trial as the worker ran it (tensors live in the outputs file, same order)."""

    size: str
    distribution: str
    buffer: str = Field(description="'fresh', 'same buffer, new values' or 'new buffer, same shape'")
    input_shapes: list[list[int]] = Field(default_factory=list)
    input_digests: list[str] = Field(default_factory=list, description="after the call (evaluate) / as generated")
    output_kind: str = "tensor"
    output_shapes: list[list[int]] = Field(default_factory=list)
    output_dtypes: list[str] = Field(default_factory=list)
    eager_error: float | None = Field(default=None, description="reference only: fp32 eager vs fp64 truth")
    config_pass: int = 0


class BenchStats(Model):
    median_ms: float
    spread_pct: float
    wall_ms: float | None = None
    repeats: int
    note: str = ""


class WorkerResult(Model):
    mode: Mode
    ok: bool = False
    phase: str = "start"
    error: WorkerError | None = None
    trials: list[TrialRecord] = Field(default_factory=list)
    outputs_file: Path | None = None
    config_passes: int = Field(default=1, description="CPU mode: autotune configs validated one pass each")
    config_labels: list[str] = Field(default_factory=list)
    timing: BenchStats | None = None
    eager: BenchStats | None = None
    compiled: BenchStats | None = None
    compile_note: str = ""
    gpu: str = ""
    torch_version: str = ""
    kernels_launched: list[str] = Field(default_factory=list, description="candidate kernels forward launched")
    kernels_tracked: list[str] = Field(default_factory=list, description="module-level kernels watched for launches")


def round_seed(seed: int, round_: int) -> int:
    """The seed of a round's trials: fresh inputs every round, one truth shared by the round's candidates."""
    return seed * 100_003 + round_


def write_job(workdir: Path, job: WorkerJob) -> Path:
    """Write the job as workdir/job.json; returns its path."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / JOB_FILE
    path.write_text(job.model_dump_json(indent=2))
    return path


def worker_argv(job_path: Path) -> list[str]:
    """The command that runs a worker on a job file (wrap it in `ncu ...` to profile)."""
    return [sys.executable, "-m", "agent.harness.worker", str(job_path)]


def prepare_job(
    workdir: Path,
    mode: Mode,
    problem: ProblemSpec,
    *,
    code: str | None = None,
    device: Device = "cuda",
    sizes: list[SizeSet] | None = None,
    seed: int = 0,
    time_it: bool = False,
    time_eager: bool = False,
) -> Path:
    """Lay out a workdir (problem copy, candidate file, outputs dir) and write its job; returns the job path.

    `sizes` defaults to the problem's sizes for the device (GPU: `sizes`, CPU: `cpu_sizes`).
    """
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    problem_copy = workdir / PROBLEM_FILE
    shutil.copyfile(problem.path, problem_copy)
    candidate = None
    if code is not None:
        candidate = workdir / CANDIDATE_FILE
        candidate.write_text(code)
    outputs = workdir / "outputs"
    outputs.mkdir(exist_ok=True)
    job = WorkerJob(
        mode=mode,
        problem_path=problem_copy,
        candidate_path=candidate,
        sizes=sizes if sizes is not None else (problem.sizes if device == "cuda" else problem.cpu_sizes),
        device=device,
        seed=seed,
        time_it=time_it,
        time_eager=time_eager,
        result_path=workdir / RESULT_FILE,
        outputs_dir=outputs,
    )
    return write_job(workdir, job)


def worker_env(device: Device) -> dict[str, str]:
    """Environment a worker needs on top of the sandbox's: our package importable, CPU mode's interpreter."""
    import agent

    root = str(Path(agent.__file__).resolve().parent.parent)
    paths = [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {"PYTHONPATH": os.pathsep.join(paths), "PYTHONFAULTHANDLER": "1", "PYTHONUNBUFFERED": "1"}
    if device == "cpu":
        env.update({"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"})
    if os.environ.get("AGENT_GPU_LOCK"):  # set by agent.scale's workers: GPUs shared by several (gpulock.py)
        env["AGENT_GPU_LOCK"] = os.environ["AGENT_GPU_LOCK"]
    return env


def read_result(path: Path) -> WorkerResult | None:
    """The worker's result file, or None where it never got written (crash, kill) or is unreadable."""
    try:
        return WorkerResult.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None
