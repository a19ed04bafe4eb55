"""A sandboxed command's process tree, read from /proc: who is below it, how much memory it holds, killing it."""

from __future__ import annotations

import os
import signal as _signal
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol


class Proc(Protocol):
    """A sandboxed command as the sandbox watches it: a subprocess.Popen, or a worker forked from a template
    (agent.harness.wall.template.WarmProc)."""

    pid: int
    returncode: Any

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


# Sandboxed commands running in this process, so a signal that stops the agent takes them down first (they run in
# their own sessions: a terminal's Ctrl-C never reaches them). Process-wide by nature, like subprocess's own table.
_running: set[Proc] = set()
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


def started(proc: Proc) -> None:
    with _running_lock:
        _running.add(proc)
    if _stopping.is_set():
        _kill_group(proc)


def ended(proc: Proc) -> None:
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


def _kill_group(proc: Proc) -> None:
    for target in (lambda: os.killpg(proc.pid, _signal.SIGKILL), proc.kill):
        try:
            target()
        except (ProcessLookupError, PermissionError, OSError):
            pass


def kill(proc: Proc) -> None:
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


def _stat(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command's name (state, ppid, ...), or None for a process gone.
    Read with os-level calls: the sandbox polls every process's stat 20 times a second while a command runs
    (descendants), and a buffered file object costs a third more CPU than the read itself."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    end = data.rfind(b")")  # the name may hold spaces and parentheses: it ends at the last one
    return data[end + 1:].split() if end >= 0 else None


def alive(pid: int) -> bool:
    """Running (not a zombie, not dead)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in (b"Z", b"X")


def _tree(root: int) -> dict[int, list[bytes]]:
    """`root` and every live process below it (orphans in a PID namespace are re-parented to its init, still
    below), each with its stat fields: one pass over /proc, each process's stat read once."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[bytes]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(name)
            if fields is not None and len(fields) > 21:
                pid = int(name)
                stats[pid] = fields
                children.setdefault(int(fields[1]), []).append(pid)
    out = {root: stats[root]} if root in stats else {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out[child] = stats[child]
            stack.append(child)
    return out


def descendants(root: int) -> list[int]:
    """Every live process below `root` (orphans in a PID namespace are re-parented to its init, still below)."""
    return [pid for pid in _tree(root) if pid != root]


def rss_mb(root: int) -> float:
    """Resident memory of `root` and everything below it, in MiB."""
    page = os.sysconf("SC_PAGE_SIZE")
    # fields after the name: state ppid pgrp ... rss is the 22nd
    return sum(int(fields[21]) for fields in _tree(root).values()) * page / (1 << 20)
