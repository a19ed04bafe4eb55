"""Running one worker behind the sandbox's wall, and reading back what it wrote: the parent's side of every mode."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from agent.errors import HarnessError
from agent.harness import preflight
from agent.harness.job import Device, worker_argv, worker_env
from agent.harness.wall.sandbox import Deadline, SandboxResult, SandboxUnavailable, run_sandboxed
from agent.harness.settings import settings
from agent.schema import ProblemSpec, SizeSet

log = logging.getLogger(__name__)


def sizes_for(problem: ProblemSpec, device: Device) -> list[SizeSet]:
    """The sizes a problem is judged at: full size on the GPU, the reduced cpu sizes in CPU mode."""
    return problem.sizes if device == "cuda" else problem.cpu_sizes


def run_job(workdir: Path, job_path: Path, device: Device, timeout_s: float, memory_mb: int | None,
            hide: list[Path], gpu_lock: Path | None, deadline: Deadline | None = None, *, wrap: list[str] | None = None,
            env: dict[str, str] | None = None, output_limit_bytes: int | None = None) -> SandboxResult:
    """The one way a job (agent.harness.job, any mode) runs in the wall: its worker, sandboxed, behind the GPU's lock.

    Evaluation, the shared truths and baselines, the torch.compile capture and profiling all come here; `wrap` runs
    the worker under a tool (ncu's command line, which must run inside the wall with its target), `env` adds to the
    worker's environment. A sandbox that cannot be built is a HarnessError (never run without)."""
    cfg = settings().sandbox
    mem = memory_mb or (cfg.memory_mb_cpu if device == "cpu" else cfg.memory_mb_gpu)
    env = {**worker_env(device), **(env or {})}
    expose = []
    if gpu_lock is not None:  # the worker takes this GPU's lock: visible (read-only) inside the sandbox
        from agent.harness.wall.gpulock import ensure

        ensure(gpu_lock)
        expose.append(gpu_lock.parent)
    try:
        sb = run_sandboxed([*(wrap or []), *worker_argv(job_path)], workdir=workdir, timeout_s=timeout_s, env=env,
                           memory_mb=mem, output_limit_bytes=output_limit_bytes or cfg.output_limit_bytes,
                           address_space_limit=device == "cpu",
                           hide=hide, expose=expose, deadline=deadline, queue_lock=gpu_lock)
    except SandboxUnavailable as e:
        raise HarnessError(str(e), "candidates never run without their sandbox") from e
    if not sb.contained:
        why = sb.stderr.strip().splitlines()[-1] if sb.stderr.strip() else "?"
        raise HarnessError(f"the sandbox could not be built: {why}", "see agent/harness/wall/contain.py for what it needs")
    if _suspect(sb, workdir):  # ours, or the code's it ran? (agent.harness.preflight)
        preflight.verify(device, tuple(hide))
    return sb


def prestart(device: Device) -> bool:
    """Start the warm template of `device`'s workers now (in a thread of the caller's choosing: it imports torch and
    Triton, seconds), so the first job forks from it; whether one is live."""
    from agent.harness.wall.sandbox import prestart as prestart_template

    return prestart_template(worker_env(device))


def _suspect(sb: SandboxResult, workdir: Path) -> bool:
    """Whether the worker's stderr or its result's error speaks of a failed import."""
    if preflight.suspect(sb.stderr):
        return True
    try:
        text = (workdir / "result.json").read_text(errors="replace")
    except OSError:
        return False
    return preflight.suspect(text)


def load_tensors(path: Path | None, key: str, workdir: Path) -> list[list]:
    """The tensors a worker saved under `key`; nothing for a path outside its workdir or an unreadable file."""
    import torch

    if path is None:
        return []
    path = Path(path)
    if workdir.resolve() not in path.resolve().parents:  # a path the worker names must lie in its workdir
        return []
    try:
        return list(torch.load(path, map_location="cpu", weights_only=True)[key])
    except Exception as e:  # missing or corrupt: treated as no outputs
        log.debug("could not load %s: %s", path, e)
        return []


def gpu_name() -> str:
    """The name of the GPU this process's workers run on (nvidia-smi: no CUDA context here)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i",
                              os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "cuda"
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "cuda"
