"""The evaluation worker's side: the harness on one GPU (or in CPU mode), one candidate at a time.

It runs in a local worker process (`_serve`, the spawn target of agent.scale.pool.LocalHandle) or as a Ray actor
(agent.scale.raypool.RayHandle); both reach it by this module path.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent.schema import EvalResult, ProblemSpec, Profile

log = logging.getLogger(__package__)  # "agent.scale", as before the split: log lines keep their name


class ProfileReply(BaseModel):
    profile: Profile | None = None
    report: bytes | None = None
    error_kind: str = ""
    error: str = ""
    hint: str | None = None


class EvalWorker:
    """One evaluation worker: the harness on one GPU (or in CPU mode), one candidate at a time.

    Every method answers (status, value): ("ok", value), ("harness_error", message) when the problem itself
    cannot be evaluated, ("error", message) for a bug in this worker. Nothing crosses the process boundary as
    an exception (Ray and pickling mangle those)."""

    def __init__(self, device: str, gpu: str | None = None) -> None:
        if gpu is not None:  # local workers are pinned here; Ray sets CUDA_VISIBLE_DEVICES for its actors
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu
        from agent.harness import Shared

        self.device = device
        self.gpu_lock: Path | None = None
        # the workers sharing this GPU take its lock (agent.harness.wall.gpulock); without a GPU, the one a request names
        if device == "cuda":
            from agent.harness.wall.gpulock import lock_path

            self.gpu_lock = lock_path(os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0")
        self.shared = Shared()  # this worker's truths and baselines, kept (bounded) across rounds
        self._problems: dict[str, Path] = {}

    def run(self, method: str, *args: Any) -> tuple[str, Any]:
        from agent.errors import HarnessError

        try:
            return "ok", getattr(self, method)(*args)
        except HarnessError as e:
            return "harness_error", str(e)
        except Exception as e:
            log.exception("evaluation worker: %s failed", method)
            return "error", f"{type(e).__name__}: {e}"

    def info(self) -> dict[str, Any]:
        import socket

        return {"pid": os.getpid(), "host": socket.gethostname(), "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                "device": self.device}

    def evaluate(self, req: Any, problem_source: str) -> EvalResult:
        from agent.harness import evaluate_many

        req = req.model_copy(update={"problem": self._local(req.problem, problem_source),
                                     "cache_dir": _usable_dir(req.cache_dir),
                                     "gpu_lock": self.gpu_lock or req.gpu_lock})
        [result] = evaluate_many([req], self.shared)
        return result

    def profile(self, req: Any, problem_source: str) -> ProfileReply:
        from agent.profiler import ProfileError, profile

        with tempfile.TemporaryDirectory(prefix="agent-scale-profile-") as d:
            out = Path(d) / "profile.ncu-rep"
            req = req.model_copy(update={"problem": self._local(req.problem, problem_source), "out": out, "device": 0,
                                         "gpu_lock": self.gpu_lock or req.gpu_lock})
            try:
                prof = profile(req)
            except ProfileError as e:
                return ProfileReply(error_kind=e.kind, error=e.message, hint=e.hint)
            return ProfileReply(profile=prof, report=out.read_bytes())

    def _local(self, problem: ProblemSpec, source: str) -> ProblemSpec:
        """The problem as a file on this host: its own path where that holds the same source, else a copy."""
        try:
            if problem.path.read_text() == source:
                return problem
        except OSError:
            pass
        key = hashlib.sha256(source.encode()).hexdigest()[:16]
        if key not in self._problems:
            d = Path(tempfile.gettempdir()) / "agent-scale-problems"
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"{problem.name}-{key}.py"
            path.write_text(source)
            self._problems[key] = path
        return problem.model_copy(update={"path": self._problems[key], "start": None})


def _usable_dir(path: Path | None) -> Path | None:
    """The driver's cache directory where this host can write it (a remote host may not have it): else memory only."""
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
        return path if os.access(path, os.W_OK) else None
    except OSError:
        return None


def _serve(conn: Any, device: str, gpu: str | None) -> None:
    """A local worker process: answer (method, args) messages until None or the pipe closes."""
    logging.basicConfig(level=logging.WARNING, format=f"[eval worker {gpu or device}] %(levelname)s %(message)s")
    worker = EvalWorker(device, gpu)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        method, args = msg
        conn.send(worker.run(method, *args))
