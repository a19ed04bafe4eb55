"""agent.harness.wall.lockwait: a sandboxed command's clock stops while it is queued for its GPU's lock behind another
evaluation, and only then (real processes, real flock, the kernel's /proc/locks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.harness.wall.gpulock import GpuLock, ensure, lock_path
from agent.harness.wall.lockwait import LockWatch
from agent.harness.wall.sandbox import isolation, run_sandboxed

PY = sys.executable
namespaces = pytest.mark.skipif(isolation() == "none", reason="unshare is refused on this machine")

# Takes the lock exclusively as gpulock.GpuLock does (turnstile, then the lock), without importing the project:
# the sandboxed command is any process.
TAKE = """
import fcntl, os, sys
lock = sys.argv[1]
turn = os.open(lock[:-len(".lock")] + ".turn", os.O_RDONLY)
fd = os.open(lock, os.O_RDONLY)
fcntl.flock(turn, fcntl.LOCK_EX); fcntl.flock(fd, fcntl.LOCK_EX); fcntl.flock(turn, fcntl.LOCK_UN)
print("got it", flush=True)
"""
# Contends with itself: a child takes the lock and keeps it, the command then waits for it.
SELF = """
import fcntl, os, sys, time
lock = sys.argv[1]
if os.fork() == 0:
    fd = os.open(lock, os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); time.sleep(60); os._exit(0)
time.sleep(0.5)
fd = os.open(lock, os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX)
print("got it", flush=True)
"""


@pytest.fixture
def lock():
    path = lock_path(f"test-lockwait-{os.getpid()}-{time.monotonic_ns()}")  # outside /tmp: the sandbox's is private
    ensure(path)
    yield path
    for f in (path, path.with_suffix(".turn")):
        f.unlink(missing_ok=True)


def _held_for(path: Path, seconds: float) -> threading.Thread:
    """This process (outside any command's tree) holds the lock for `seconds`, as another evaluation's timing does."""
    held = GpuLock(path)
    held.exclusive()

    def release() -> None:
        time.sleep(seconds)
        held.close()

    t = threading.Thread(target=release, daemon=True)
    t.start()
    return t


def _until(cond, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_a_process_waiting_behind_another_evaluations_holder_is_queued(lock):
    releaser = _held_for(lock, 3.0)
    proc = subprocess.Popen([PY, "-c", TAKE, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        watch = LockWatch(lock)
        assert _until(lambda: watch.queued(proc.pid))
        releaser.join()
        assert proc.wait(timeout=10) == 0 and "got it" in proc.stdout.read()
        assert not watch.queued(proc.pid)  # it holds the lock now, nobody waits
    finally:
        proc.kill()


def test_waiting_for_its_own_process_is_not_queued(lock):
    proc = subprocess.Popen([PY, "-c", SELF, str(lock)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        watch = LockWatch(lock)
        blocked = _until(lambda: any("->" in line and line.split()[-3] in watch.ids
                                     for line in Path("/proc/locks").read_text().splitlines()), 5.0)
        assert blocked  # the command is really waiting, behind its own child
        assert not watch.queued(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_watch_on_a_missing_lock_sees_nothing(tmp_path):
    assert not LockWatch(tmp_path / "gpu-none.lock").queued(os.getpid())


@namespaces
def test_queued_time_is_not_held_against_the_limit(lock, tmp_path):
    """gap_large on an H100: an honest answer queued 25.9 s behind its neighbours' timings was killed at its 43 s
    limit. Queued behind another holder for 4 s with a 2 s limit, the command now finishes, and says how long."""
    _held_for(lock, 4.0)
    res = run_sandboxed([PY, "-c", TAKE, str(lock)], workdir=tmp_path, timeout_s=2.0, expose=[lock.parent],
                        queue_lock=lock)
    assert not res.timed_out and res.returncode == 0 and "got it" in res.stdout
    assert 2.5 < res.queued_s < 5.0


@namespaces
def test_without_the_watch_the_same_wait_times_out(lock, tmp_path):
    _held_for(lock, 4.0)
    res = run_sandboxed([PY, "-c", TAKE, str(lock)], workdir=tmp_path, timeout_s=2.0, expose=[lock.parent])
    assert res.timed_out and res.queued_s == 0.0


@namespaces
def test_a_command_contending_with_itself_gets_no_extra_time(lock, tmp_path):
    start = time.monotonic()
    res = run_sandboxed([PY, "-c", SELF, str(lock)], workdir=tmp_path, timeout_s=2.0, expose=[lock.parent],
                        queue_lock=lock)
    assert res.timed_out and res.queued_s == 0.0
    assert time.monotonic() - start < 8.0
