"""A sandboxed command's process tree, read from /proc: who is below it, how much memory it holds, killing it."""

from __future__ import annotations

import os
import signal as _signal
import subprocess
import threading
import time
from collections.abc import Callable

# Sandboxed commands running in this process, so a signal that stops the agent takes them down first (they run in
# their own sessions: a terminal's Ctrl-C never reaches them). Process-wide by nature, like subprocess's own table.
_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()
_stopping = threading.Event()  # set by kill_running: a command started after it (a queued candidate) dies at once


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _load_prctl():  # noqa: ANN202 (a ctypes function, or None off Linux)
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def dies_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGKILL when the thread that started it dies: a SIGKILL of the agent
    (no handler runs) must not leave a candidate running, and unshare's --kill-child then takes the whole
    namespace. The thread that starts a sandboxed command waits for it, so it outlives it in every other case."""
    prctl = _load_prctl()  # resolved before fork: the child only calls it
    if prctl is None:
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the agent died before the signal was armed
            os._exit(1)

    return arm


def started(proc: subprocess.Popen) -> None:
    with _running_lock:
        _running.add(proc)
    if _stopping.is_set():
        _kill_group(proc)


def ended(proc: subprocess.Popen) -> None:
    with _running_lock:
        _running.discard(proc)


def kill_running() -> int:
    """SIGKILL every sandboxed command this process started and has not seen end (a stop signal); how many."""
    _stopping.set()
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        _kill_group(proc)
    return len(procs)


def _kill_group(proc: subprocess.Popen) -> None:
    for target in (lambda: os.killpg(proc.pid, _signal.SIGKILL), proc.kill):
        try:
            target()
        except (ProcessLookupError, PermissionError, OSError):
            pass


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL everything the command started. unshare's forked child is PID 1 of the namespace and dies with
    unshare (--kill-child); the kernel then kills every process left in the namespace. The group and the tree are
    killed too, for the uncontained case."""
    pids = descendants(proc.pid)
    for target in (lambda: os.killpg(proc.pid, _signal.SIGKILL), *(lambda p=p: os.kill(p, _signal.SIGKILL) for p in pids)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.02)  # GPU memory is freed before the next command starts


def _stat(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Running (not a zombie, not dead)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in (b"Z", b"X")


def descendants(root: int) -> list[int]:
    """Every live process below `root` (orphans in a PID namespace are re-parented to its init, still below)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def rss_mb(root: int) -> float:
    """Resident memory of `root` and everything below it, in MiB."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in [root, *descendants(root)]:
        fields = _stat(pid)
        if fields is not None:
            total += int(fields[21]) * page  # fields after the name: state ppid pgrp ... rss is the 22nd
    return total / (1 << 20)
