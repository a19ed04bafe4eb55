"""A per-GPU reader/writer lock between processes (flock on two files), so that several candidates can share a GPU
while none is timed (or profiled) alongside other work on it.

    shared():    while a process uses the GPU for anything but timing (building, validation, the reference)
    exclusive(): while it times or profiles: waits until no other process holds the lock

Writers have priority (a turnstile file): once a process waits for exclusive, new shared holders queue behind it,
so a timing never starves behind a stream of validations. flock locks belong to the open file: they are released
when the process exits or is killed, so a crashed or timed-out candidate never leaves a GPU locked.

The workers of `agent.scale` name one lock per physical GPU (RoundRequests.gpu_lock); the harness passes it to its
worker process in the job (WorkerJob.gpu_lock), which takes it. The files live outside /tmp
(the sandbox gives each candidate a private /tmp): /dev/shm where it exists, else ~/.cache/agent/locks.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def lock_dir() -> Path:
    """A directory every process of this host sees at the same path, even inside the sandbox's namespaces."""
    shm = Path("/dev/shm")
    base = shm / "agent-gpu-locks" if shm.is_dir() and os.access(shm, os.W_OK) else (
        Path.home() / ".cache" / "agent" / "locks")
    base.mkdir(parents=True, exist_ok=True)
    return base


def lock_path(gpu: str) -> Path:
    """The lock file of physical GPU `gpu` (an index or UUID as CUDA_VISIBLE_DEVICES names it)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in gpu) or "0"
    return lock_dir() / f"gpu-{safe}.lock"


class GpuLock:
    """The reader/writer lock at `path` (path.lock held shared/exclusive; path.turn is the writers' turnstile)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd = _open(self.path)
        self._turn = _open(self.path.with_suffix(".turn"))
        self.state = "none"  # "none" | "shared" | "exclusive"

    def shared(self) -> None:
        if self.state == "shared":
            return
        self.release()
        fcntl.flock(self._turn, fcntl.LOCK_EX)  # queue behind a waiting writer
        try:
            fcntl.flock(self._fd, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._turn, fcntl.LOCK_UN)
        self.state = "shared"

    def exclusive(self) -> None:
        if self.state == "exclusive":
            return
        self.release()  # flock's upgrade is not atomic anyway: say so by releasing first
        fcntl.flock(self._turn, fcntl.LOCK_EX)  # hold the turnstile: no new reader gets in while we wait
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        finally:
            fcntl.flock(self._turn, fcntl.LOCK_UN)
        self.state = "exclusive"

    def release(self) -> None:
        if self.state != "none":
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            self.state = "none"

    def close(self) -> None:
        self.release()
        os.close(self._fd)
        os.close(self._turn)


def ensure(path: Path) -> None:
    """Create the lock's two files (the parent does, before a worker starts: the worker sees them read-only)."""
    for p in (Path(path), Path(path).with_suffix(".turn")):
        os.close(_open(p))


def _open(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:  # inside the sandbox the lock directory is read-only: flock needs no write access
        return os.open(path, os.O_RDONLY)
    try:
        os.fchmod(fd, 0o666)  # another user's agent on this host must be able to take the same lock
    except OSError:
        pass
    return fd
