"""Time a sandboxed command spends queued for its GPU's lock behind other evaluations: not the candidate's time.

Candidates evaluated side by side share a GPU through agent.harness.wall.gpulock, and each one's timing phase waits while
another's holds the lock. Counting that wait against the candidate's limit times out honest answers (gap_large on
an H100: 25.9 s of a 43 s limit spent queued, verdict `timeout`). The worker knows how long it waited, but it runs
the candidate's code and its word is data, never a limit; so the parent reads the kernel's own account:
/proc/locks lists every flock with its holder's pid, and each blocked request ("->") with the waiter's pid, in the
reader's PID namespace.

The command's clock stops only while one of its processes is blocked on the lock (or its turnstile) and every
holder of that file is a live process outside its tree: a candidate cannot pause its own clock by contending with
itself, and the pause is bounded by other evaluations' time, each under its own limit.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.harness.wall import proctree


def _lock_id(path: Path) -> str | None:
    """The file as /proc/locks names it: MAJOR:MINOR:INODE (device numbers in hex)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


class LockWatch:
    """Whether a command's process tree is queued behind others for the lock at `lock` (gpulock.GpuLock's path)."""

    def __init__(self, lock: Path, locks_file: Path = Path("/proc/locks")) -> None:
        self.ids = {i for i in (_lock_id(lock), _lock_id(lock.with_suffix(".turn"))) if i}
        self.locks_file = locks_file

    def queued(self, root: int) -> bool:
        """True while a process of `root`'s tree waits for the lock and only processes outside the tree hold it."""
        if not self.ids:
            return False
        try:
            lines = self.locks_file.read_text().splitlines()
        except OSError:
            return False
        holders: dict[str, set[int]] = {}
        waiters: dict[str, set[int]] = {}
        for line in lines:
            fields = line.split()
            blocked = len(fields) > 1 and fields[1] == "->"
            rest = fields[2:] if blocked else fields[1:]
            if len(rest) < 5 or rest[0] != "FLOCK" or rest[4] not in self.ids:
                continue
            try:
                pid = int(rest[3])
            except ValueError:
                continue
            (waiters if blocked else holders).setdefault(rest[4], set()).add(pid)
        if not waiters:
            return False
        tree = {root, *proctree.descendants(root)}
        for lock_id, waiting in waiters.items():
            held_by = holders.get(lock_id, set())
            # a holder's pid that is gone (<= 0: not in our namespace, or exited while a child keeps the lock) or
            # inside the tree proves nothing about other evaluations: no pause
            if waiting & tree and held_by and all(p > 0 and p not in tree and proctree.alive(p) for p in held_by):
                return True
        return False
