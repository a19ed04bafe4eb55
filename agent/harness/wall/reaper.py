"""The small waiter a warm worker's two outer processes become (agent.harness.wall.forkserver): run with `python -I -S`,
standard library only, so that neither keeps a copy of the template's memory (their resident pages would count
against the candidate's memory limit, and the one outside the PID namespace runs as root).

    reaper.py PID        as PID 1 of the namespace: reap every orphan until PID exits, then exit as a shell
                         reports it (its code, or 128 + the signal), which takes the whole namespace down;
    reaper.py PID FD     outside the namespace: wait for PID (that PID 1) and write its status to FD as one
                         little-endian int32 (its exit code, or minus the signal that killed it, as subprocess does).
"""

from __future__ import annotations

import os
import struct
import sys

FAIL = 125


def wait_for(child: int, as_shell: bool) -> int:
    """Reap children until `child` ends; its status as a shell (128 + signal) or as subprocess (-signal) says it."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return FAIL
        except InterruptedError:
            continue
        if pid == child:
            if os.WIFEXITED(status):
                return os.WEXITSTATUS(status)
            sig = os.WTERMSIG(status)
            return 128 + sig if as_shell else -sig


def main(argv: list[str]) -> int:
    child = int(argv[0])
    if len(argv) == 1:
        return wait_for(child, as_shell=True)
    fd = int(argv[1])
    code = wait_for(child, as_shell=False)
    os.write(fd, struct.pack("<i", code))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
