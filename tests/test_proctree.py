"""agent.harness.wall.proctree: the process tree the sandbox watches (every process below a command, its memory)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from agent.harness.wall.proctree import alive, descendants, kill, rss_mb

# A child that starts a grandchild, which renames itself (a name with spaces and parentheses, as /proc/PID/stat
# shows it) and holds `mb` MiB; the child prints the grandchild's pid, then both wait.
_TREE = """
import subprocess, sys, time
g = subprocess.Popen([sys.executable, "-c", "import ctypes; ctypes.CDLL(None).prctl(15, b'x) (y z', 0, 0, 0); "
                      "b = bytearray({mb} << 20); b[::4096] = b'x' * len(b[::4096]); "
                      "print('ready', flush=True); import time; time.sleep(60)"], stdout=subprocess.PIPE, text=True)
g.stdout.readline()
print(g.pid, flush=True)
time.sleep(60)
"""


def _start(mb: int) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", _TREE.format(mb=mb)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def test_descendants_are_every_process_below_and_nothing_else():
    proc, grandchild = _start(1)
    try:
        found = descendants(proc.pid)
        assert found == [grandchild]  # the grandchild, not the command itself
        assert os.getpid() not in found and proc.pid not in found
        assert descendants(grandchild) == [] and alive(proc.pid) and alive(grandchild)
    finally:
        kill(proc)
    assert not alive(grandchild) and not alive(proc.pid)


def test_a_name_with_spaces_and_parentheses_does_not_shift_the_fields():
    proc, grandchild = _start(1)
    try:
        with open(f"/proc/{grandchild}/stat", "rb") as f:
            assert b"(x) (y z)" in f.read()  # the name the parser must step over to reach its ppid
        assert descendants(proc.pid) == [grandchild] and alive(grandchild)
    finally:
        kill(proc)


def test_memory_counts_the_whole_tree():
    proc, grandchild = _start(200)
    try:
        own = rss_mb(grandchild)
        assert own >= 200
        assert rss_mb(proc.pid) >= own + 5  # the grandchild's and the child's interpreter
    finally:
        kill(proc)


def test_a_process_gone_is_neither_alive_nor_below_anything():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    time.sleep(0.05)
    assert not alive(proc.pid) and descendants(proc.pid) == [] and rss_mb(proc.pid) == 0
