"""A candidate's worker started before its job exists, so that its slowest part overlaps the parent's.

A worker spends about 5 s importing torch, Triton and the harness (H100: `import torch` alone 3.0-4.6 s), and the
parent spends as long before it can write the job: importing the same libraries for the static checks, planning
trials, reading cached truths. Prewarm starts the sandboxed worker at once; it imports only trusted code, then
waits for its job file (agent.harness.worker.main). The parent writes the job once the answer has passed its checks
(`release`, which also arms the candidate's time limit from that moment) or ends the worker unused (`cancel`).
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from agent.harness.job import JOB_FILE, Device, publish_job
from agent.harness.wall.sandbox import Deadline, SandboxResult, hand_over


class Prewarm:
    """One early worker: `release(seconds)` after writing its job into `workdir`, then `wait()`; or `cancel()`."""

    def __init__(self, device: Device, hide: list[Path], gpu_lock: Path | None, cap_s: float,
                 memory_mb: int | None = None) -> None:
        from agent.harness.runner import run_job

        self.device, self.hide, self.gpu_lock = device, list(hide), gpu_lock
        self.workdir = Path(tempfile.mkdtemp(prefix="agent-eval-")).resolve()
        self.job_path = self.workdir / JOB_FILE
        self.deadline = Deadline()
        self._result: SandboxResult | None = None
        self._error: BaseException | None = None

        def run() -> None:
            try:  # cap_s bounds a worker nobody releases; the candidate's own limit starts at release
                self._result = run_job(self.workdir, self.job_path, device, cap_s, memory_mb, self.hide, gpu_lock,
                                          self.deadline)
            except BaseException as e:  # a sandbox that cannot be built: raised again in wait()
                self._error = e

        self._thread = threading.Thread(target=run, name="agent-prewarm", daemon=True)
        self._thread.start()

    def fits(self, device: Device, hide: list[Path], gpu_lock: Path | None) -> bool:
        """Whether this worker was started the way a job with these settings needs."""
        return (device, sorted(map(str, hide)), gpu_lock) == (self.device, sorted(map(str, self.hide)), self.gpu_lock)

    def release(self, seconds: float, extend: Callable[[], float] | None = None) -> None:
        """The workdir is laid out with its job unpublished (prepare_job(..., publish=False)): hand the new files to
        the worker, publish the job (the worker starts on it) and start the candidate's time limit (`extend`: more
        seconds it is granted as it runs, agent.harness.wall.limit.ConfigPasses)."""
        hand_over(self.workdir)
        self.deadline.arm(seconds, extend)
        publish_job(self.job_path)

    def wait(self) -> SandboxResult:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def cancel(self) -> None:
        """End the worker unused (its answer failed the checks, or nothing was left to evaluate)."""
        import shutil

        self.deadline.cancel()
        self._thread.join()
        shutil.rmtree(self.workdir, ignore_errors=True)
