"""Workers that start warm: the parent's side of the template (agent.harness.wall.forkserver; docs/warm-workers.md).

A cold worker spends ~3.5 s (this 2-core machine; ~5 s on an H100 host) importing torch, Triton and the harness. A
template per environment imports them once, lazily, at the first worker this process starts; every worker after
is forked from it behind a wall of its own (~0.05 s). A template that dies is started again at the next worker;
one that cannot start (or whose wall does not stand) leaves this process on the cold path, as
AGENT_WARM_WORKERS=0 or harness.toml's sandbox.warm_workers = false do. Templates end with the process.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.harness.settings import settings

if TYPE_CHECKING:
    from agent.harness.wall.spec import Isolation

log = logging.getLogger(__name__)

ENV = "AGENT_WARM_WORKERS"
START_S = 300.0  # importing torch on a loaded machine (the first import after boot reads ~1 GB of files)
REPLY_S = 30.0
_PER_JOB = ("HOME", "TMPDIR")  # set per worker: the template's are its own
_MOST = 4  # templates at once (environments: CPU mode, a GPU, another PYTHONPATH)
# A fork copies only the forking thread: a template must hold no other (forkserver refuses to fork with more). The
# BLAS and OpenMP pools start one thread per core at import (16 on the GPU machine, where CUDA mode's environment
# does not pin them as CPU mode's does): pinned to one here, unless the environment says otherwise.
_ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_WORKER = "agent.harness.worker.main"
_ROOM = 4096  # bytes of command line a worker's own may take (forkserver.retitle): the job's path, whatever TMPDIR is


class TemplateFailed(RuntimeError):
    """A template could not start or answer; its workers start cold."""


class WarmProc:
    """A worker forked by a template, as run_sandboxed and agent.harness.wall.proctree see a process. `pid` is its
    outermost process (I: the template's child, leader of its own session); the status comes through a pipe that
    only I writes (its end closes with it: a kill reads as SIGKILL)."""

    def __init__(self, pid: int, pidfd: int, status_fd: int, args: list[str]) -> None:
        self.pid, self.args = pid, args
        self.returncode: int | None = None
        self._pidfd, self._status = pidfd, status_fd

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._status], [], [], 0)[0]:
            self._read()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._read()
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None and self._pidfd >= 0:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except OSError:
                pass

    def _read(self) -> None:
        data = b""
        while len(data) < 4:
            chunk = os.read(self._status, 4 - len(data))
            if not chunk:
                break
            data += chunk
        self.returncode = struct.unpack("<i", data)[0] if len(data) == 4 else -signal.SIGKILL
        os.close(self._status)
        pidfd, self._pidfd = self._pidfd, -1  # kill() from another thread must not signal a reused number
        os.close(pidfd)


class Template:
    """One template process, started with the workers' environment `env` (HOME and TMPDIR of its own)."""

    def __init__(self, env: dict[str, str], wall: str) -> None:
        self.userns = wall == "user-namespaces"
        self.home = Path(tempfile.mkdtemp(prefix="agent-template-")).resolve()
        self._lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        log_path = self.home / "template.log"
        try:
            with open(log_path, "wb") as out:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "agent.harness.wall.forkserver", str(theirs.fileno()), wall, " " * _ROOM],
                    pass_fds=[theirs.fileno()], env={**_ONE_THREAD, **env, "HOME": str(self.home),
                                                     "TMPDIR": str(self.home)},
                    cwd=self.home, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True)
        finally:
            theirs.close()
        try:
            reply = self._reply(START_S, "start")
            if "ready" not in reply:
                raise TemplateFailed(reply.get("error") or _tail(log_path))
        except BaseException:
            self.close()
            raise

    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(self, spec: dict, env: dict[str, str], job: str | None, out: int, err: int) -> WarmProc:
        """Fork a worker on `job` (None: a probe, the wall built and nothing run) behind the wall `spec`
        (sandbox.contain_spec), its stdout and stderr to `out` and `err`."""
        status_r, status_w = os.pipe()
        try:
            request = json.dumps({"spec": spec, "env": env, "job": job, "userns": self.userns}).encode()
            with self._lock:
                try:
                    socket.send_fds(self._sock, [request], [out, err, status_w])
                except OSError as e:
                    raise TemplateFailed(f"the template is gone: {e}") from e
                reply, fds = self._reply(REPLY_S, "fork"), self._fds
        except BaseException:
            os.close(status_r)
            raise
        finally:
            os.close(status_w)
        if "pid" not in reply or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            os.close(status_r)
            raise TemplateFailed(reply.get("error", "no worker"))
        argv = [sys.executable, "-m", _WORKER, job or ""]
        return WarmProc(int(reply["pid"]), fds[0], status_r, argv)

    def _reply(self, timeout: float, what: str) -> dict[str, Any]:
        self._fds: list[int] = []
        if not select.select([self._sock], [], [], timeout)[0]:
            raise TemplateFailed(f"the template did not answer ({what}) within {timeout:.0f} s")
        msg, self._fds, _, _ = socket.recv_fds(self._sock, 1 << 16, 1)
        if not msg:
            raise TemplateFailed(f"the template ended ({what})")
        return dict(json.loads(msg))

    def close(self) -> None:
        """End the template; its workers with it (it kills them when its socket closes, and they die with it)."""
        self._sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "the template ended"
    return lines[-1] if lines else "the template ended"


def enabled() -> bool:
    """Warm starts unless AGENT_WARM_WORKERS=0 (or harness.toml's sandbox.warm_workers) says cold."""
    value = os.environ.get(ENV)
    if value is not None:
        return value.strip().lower() not in ("0", "false", "no", "off")
    return settings().sandbox.warm_workers


def is_worker(argv: list[str]) -> bool:
    """Only the worker itself starts warm (an ncu around it, or any other command, starts as asked)."""
    return len(argv) == 4 and [str(a) for a in argv[:3]] == [sys.executable, "-m", _WORKER]


class Templates:
    """This process's templates, one per worker environment (process-wide by nature, like subprocess's own table:
    every sandboxed worker of the process may fork from them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[tuple, Template] = {}
        self._failed: dict[tuple, str] = {}

    def prestart(self, env: dict[str, str], iso: Isolation) -> bool:
        """Start the template of workers with this environment now, if there is none (a run's first candidate then
        forks from it instead of waiting for torch's import behind its own checks). Whether one is live."""
        if not iso.unshare or not enabled():
            return False
        key, base = _keyed(env, iso)
        template = self._get(key, base, iso)
        return template is not None

    def start(self, argv: list[str], spec: dict, env: dict[str, str], out: int, err: int,
              iso: Isolation) -> WarmProc | None:
        """The worker `argv` forked from the template of its environment; None where it must start cold."""
        if not iso.unshare or not is_worker(argv) or not enabled():
            return None
        key, base = _keyed(env, iso)
        for _ in range(2):  # a template found dead at the fork is started again, once
            template = self._get(key, base, iso)
            if template is None:
                return None
            try:
                return template.spawn(spec, env, str(argv[3]), out, err)
            except TemplateFailed as e:
                log.info("a worker template failed (%s): starting another", e)
                with self._lock:
                    if self._live.get(key) is template:
                        del self._live[key]
                template.close()
        return None

    def _get(self, key: tuple, env: dict[str, str], iso: Isolation) -> Template | None:
        with self._lock:
            if key in self._failed:
                return None
            template = self._live.pop(key, None)
            if template is not None and not template.alive():
                template.close()
                template = None
            if template is None:
                t0 = time.monotonic()
                try:
                    template = _started(env, iso)
                    log.debug("a worker template started in %.2f s (%d live before it)", time.monotonic() - t0,
                              len(self._live))
                except (TemplateFailed, OSError) as e:
                    log.warning("workers start cold (their template could not start: %s)", e)
                    self._failed[key] = str(e)
                    return None
            self._live[key] = template  # the most recently used last
            while len(self._live) > _MOST:
                self._live.pop(next(iter(self._live))).close()
            return template

    def pids(self) -> list[int]:
        """The live templates' process ids (figures, tests)."""
        with self._lock:
            return [t.proc.pid for t in self._live.values() if t.alive()]

    def close(self) -> None:
        """End every template (at exit; a test starting afresh): the next worker starts a new one."""
        with self._lock:
            live, self._live, self._failed = list(self._live.values()), {}, {}
        for template in live:
            template.close()

    def forget(self) -> None:
        """In a child forked from this process: the templates are the parent's (its copies of their sockets close
        with it; closing them here would end nothing)."""
        self._lock = threading.Lock()
        self._live, self._failed = {}, {}


def _keyed(env: dict[str, str], iso: Isolation) -> tuple[tuple, dict[str, str]]:
    """A template's key (its wall and its environment but the per-job names) and that environment."""
    base = {k: v for k, v in env.items() if k not in _PER_JOB}
    return (iso.kind, tuple(sorted(base.items()))), base


def _started(env: dict[str, str], iso: Isolation) -> Template:
    """A template whose wall was seen to stand: a probe child builds it and exits."""
    from agent.harness.wall.spec import contain_spec

    template = Template(env, iso.kind)
    try:
        with tempfile.TemporaryDirectory(prefix="agent-probe-") as d:
            work = Path(d)
            if iso.uid is not None:
                os.chown(work, iso.uid, iso.uid)
            spec = contain_spec(work, iso, {"core": 0})
            with open(work / "stderr.log", "w+b") as err:
                proc = template.spawn(spec, env, None, err.fileno(), err.fileno())
                try:
                    rc = proc.wait(timeout=REPLY_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    rc = proc.wait()
                err.seek(0)
                said = err.read().decode(errors="replace").strip().splitlines()
        if rc != 0:
            raise TemplateFailed(f"its wall did not stand: {said[-1] if said else f'exit status {rc}'}")
    except BaseException:
        template.close()
        raise
    return template


templates = Templates()
atexit.register(templates.close)
os.register_at_fork(after_in_child=templates.forget)
