"""The template: a process that has imported torch, Triton and the worker's trusted code, and forks each
candidate's worker from that state behind a wall of its own (docs/warm-workers.md; the parent's side is
agent.harness.wall.template).

    python -m agent.harness.wall.forkserver FD WALL ROOM

FD is a SOCK_SEQPACKET socket to the parent, the only way in; WALL the workers' wall (sandbox.probe's kind); ROOM
blank space in the command line, where each worker writes its own (`ps` and /proc show a warm worker as
`python -m agent.harness.worker.main JOB`, as a cold one). The template never runs a job, a problem or a
candidate: it imports, then forks. Each request ({"spec", "env", "job", "userns"} with the worker's stdout, stderr
and a status pipe's write end as SCM_RIGHTS) gets three processes, as the cold path's unshare + contain.py has:

    I  (outside the namespaces' PID view)  setsid, unshare PID+mount+net (+user), then fork G and become reaper.py,
       which writes G's status into the pipe;
    G  (PID 1 of the new PID namespace)     mount /proc, build the wall (contain.build: read-only view, masks,
       loopback, limits, uid drop, no_new_privs), fork W, then become reaper.py: when W ends G exits and the kernel
       kills whatever is left in the namespace;
    W  the worker: the job's environment, argv and cwd, then agent.harness.worker.main.main.

The reply is {"pid": I} with a pidfd of I. The template reaps I when it ends; it exits (killing its children) when
the parent's end of the socket closes.
"""

from __future__ import annotations

import ctypes
import json
import os
import selectors
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from agent.harness.wall import contain

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
MS_PRIVATE, MS_SLAVE = 1 << 18, 1 << 19
REAPER = str(Path(__file__).with_name("reaper.py"))
_FDS = 3  # stdout, stderr, status pipe
_libc = ctypes.CDLL(None, use_errno=True)


def preload() -> None:
    """What every worker mode imports (a cold evaluation's sys.modules, less the candidate's): trusted code only."""
    import torch  # noqa: F401
    import torch.utils.serialization  # noqa: F401
    import triton  # noqa: F401
    import triton.compiler.code_generator  # noqa: F401
    import triton.language  # noqa: F401
    import triton.language.extra.libdevice  # noqa: F401

    from agent.harness.wall import gpulock  # noqa: F401
    from agent.harness.worker import (  # noqa: F401
        ablation, annotations, candidate, errors, inputs, interpret, memrecord, timing, trace, trusted, truth,
        main as worker,
    )


def clean() -> str:
    """Why this process must not be forked from ('' if it may): a thread (it may hold a lock the child inherits
    taken; and something would be running), or CUDA initialised (a context does not survive fork: cuInit opens
    /dev/nvidiactl; each worker initialises its own after the fork, as a cold worker does)."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        return f"{threads} threads"
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/dev/nvidia"):
                return "a GPU device is open (CUDA was initialised)"
        except OSError:
            pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "torch initialised CUDA"
    return ""


def harden(wall: str) -> None:
    """The template's own view: as root (the "namespaces" wall), a mount namespace of its own that follows the
    parent's (slave: mounts made later still arrive, nothing goes back) with every mount read-only, and no network;
    no_new_privs either way. It keeps the parent's view of the files (each worker's workdir is made after the
    template starts), never its secrets: its environment is the workers' own, cleaned. Under "user-namespaces" it stays in the parent's
    namespaces: a read-only mount seen from a worker's nested user namespace is locked read-only, its workdir too."""
    if wall == "namespaces":
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare the template's mount and network namespaces")
        contain.mount(None, "/", None, contain.MS_REC | MS_SLAVE)
        contain.read_only_everywhere(["/proc"])
    _check(_libc.prctl(contain.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")


def _check(ret: int, what: str) -> None:
    if ret != 0:
        raise contain.Refused(f"{what}: {os.strerror(ctypes.get_errno())}")


def serve(ctl: socket.socket) -> None:
    """Fork a worker per request; reap them; end with the parent's socket."""
    sel = selectors.DefaultSelector()
    sel.register(ctl, selectors.EVENT_READ, None)
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        for key, _ in sel.select():
            if key.data is not None:  # a child ended
                pidfd = key.fd
                sel.unregister(pidfd)
                os.close(pidfd)
                os.waitpid(children.pop(pidfd), 0)
                continue
            try:
                msg, fds, _, _ = socket.recv_fds(ctl, 1 << 20, _FDS)
            except OSError:
                msg, fds = b"", []
            if not msg:  # the parent is gone: so are its workers
                for pidfd in children:
                    _kill(pidfd)
                return
            _answer(ctl, sel, children, msg, fds)


def _answer(ctl: socket.socket, sel: selectors.BaseSelector, children: dict[int, int], msg: bytes,
            fds: list[int]) -> None:
    """Fork one worker for the request, or say why not. The request names paths and the worker's (clean)
    environment, nothing secret: the next child's memory is a copy of ours, freed bytes included."""
    try:
        why = clean() or ("" if len(fds) == _FDS else f"expected {_FDS} descriptors, got {len(fds)}")
        req = json.loads(msg)
        if why:
            ctl.send(json.dumps({"error": why}).encode())
            return
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                _intermediate(ctl, sel, req, fds, me)
            finally:
                os._exit(contain.FAIL)
        pidfd = os.pidfd_open(pid)
        children[pidfd] = pid
        sel.register(pidfd, selectors.EVENT_READ, pid)
        socket.send_fds(ctl, [json.dumps({"pid": pid}).encode()], [pidfd])
    except (OSError, ValueError) as e:
        ctl.send(json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
    finally:
        for fd in fds:
            os.close(fd)


def _die_with_parent() -> None:
    _check(_libc.prctl(contain.PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0),
           "set the parent-death signal")


def _kill(pidfd: int) -> None:
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass


def _intermediate(ctl: socket.socket, sel: selectors.BaseSelector, req: dict[str, Any], fds: list[int],
                  template: int) -> None:
    """I: dies with the template; nothing of the template's descriptors; new namespaces; G; then the reaper."""
    _die_with_parent()
    if os.getppid() != template:
        os._exit(contain.FAIL)
    os.setsid()
    sel.close()
    os.close(ctl.detach())
    null = os.open("/dev/null", os.O_RDONLY)
    for target, fd in ((0, null), (1, fds[0]), (2, fds[1]), (3, fds[2])):
        os.dup2(fd, target)
    os.closerange(4, os.sysconf("SC_OPEN_MAX"))
    try:
        uid, gid = os.getuid(), os.getgid()
        flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | (CLONE_NEWUSER if req.get("userns") else 0)
        _check(_libc.unshare(flags), "unshare the worker's namespaces")
        if req.get("userns"):  # what unshare --map-root-user writes: our own uid is the namespace's 0
            for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        contain.mount(None, "/", None, contain.MS_REC | MS_PRIVATE)  # nothing mounted here reaches the template
    except (contain.Refused, OSError) as e:
        _refused(e, status=3)
    g = os.fork()
    if g == 0:
        try:
            _pid1(req)
        finally:
            os._exit(contain.FAIL)
    _become_reaper([str(g), "3"])


def _refused(e: BaseException, status: int | None = None) -> None:
    """As contain.py says it: the wall could not be built, the command never ran (exit 125, one line)."""
    print(f"agent sandbox: cannot contain the command: {e}", file=sys.stderr, flush=True)
    if status is not None:
        os.write(status, contain.FAIL.to_bytes(4, "little", signed=True))
    os._exit(contain.FAIL)


def _pid1(req: dict[str, Any]) -> None:
    """G: dies with I; /proc of its own; the wall; the worker W; then the reaper, as PID 1."""
    _die_with_parent()
    os.close(3)  # the status is I's to write, never the candidate's
    try:
        contain.mount("proc", "/proc", "proc", contain.MS_NOSUID | contain.MS_NODEV | contain.MS_NOEXEC)
        contain.build(req["spec"])
    except (contain.Refused, OSError, ValueError, KeyError) as e:
        _refused(e)
    if req.get("job") is None:  # a probe: the wall stood
        os._exit(0)
    w = os.fork()
    if w == 0:
        code = 1
        try:
            code = _worker(req["env"], req["job"])
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _become_reaper([str(w)])


def _become_reaper(args: list[str]) -> None:
    """Hold no copy of the template's memory from here on; where the interpreter cannot be run, wait in place."""
    from agent.harness.wall import reaper

    try:
        os.execve(sys.executable, [sys.executable, "-I", "-S", REAPER, *args], {})
    except OSError:
        code = reaper.main(args)
        os._exit(code)


def retitle(words: list[str]) -> None:
    """Write `words` over this process's command line (/proc/PID/cmdline: the argument area arg_start..arg_end
    of /proc/self/stat, the template's own arguments and ROOM), cut to fit, the rest zeroed."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start, end = int(fields[45]), int(fields[46])  # fields 48 and 49, counted from the state (field 3)
    data = ("\0".join(words).encode() + b"\0")[:end - start - 1]
    ctypes.memmove(start, data.ljust(end - start, b"\0"), end - start)


def _worker(env: dict[str, str], job: str) -> int:
    """W: the job's environment, argv, command line and import path as `python -m agent.harness.worker.main JOB` has
    them."""
    import tempfile

    from agent.harness.worker import main as worker

    retitle([sys.executable, "-m", "agent.harness.worker.main", job])
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # read again from TMPDIR
    sys.argv = [worker.__file__, job]
    sys.path[0] = os.getcwd()  # -m puts the working directory first: the workdir, not the template's
    return worker.main([job])


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m agent.harness.wall.forkserver FD WALL ROOM", file=sys.stderr)
        return 2
    ctl = socket.socket(fileno=int(argv[0]))
    retitle([sys.executable, "-m", "agent.harness.wall.forkserver", *argv[:2]])
    try:
        harden(argv[1])
        preload()
        why = clean()
    except BaseException as e:  # said to the parent, which starts its workers cold
        why = f"{type(e).__name__}: {e}"
    if why:
        ctl.send(json.dumps({"error": why}).encode())
        return 1
    ctl.send(json.dumps({"ready": os.getpid()}).encode())
    serve(ctl)
    os._exit(0)  # no interpreter teardown (torch's takes ~1.5 s here): the parent waits for this exit


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
