"""Run any command behind the candidate's wall (agent.harness.wall.contain), with a wall-clock timeout that kills every
process it started, resident-memory and output limits, and its output captured to files.

The wall, as this machine allows it (probed once per process):
- "namespaces": we are root. unshare gives the command its own PID, mount and network namespaces; contain.py
  makes every mount read-only, masks /tmp, HOME, the agent's store and working directory behind empty tmpfs
  (the workdir and the interpreter's paths bound back), then drops to uid 65534 with no_new_privs.
- "user-namespaces": not root, but unprivileged user namespaces work: the same, mapped to our own uid as 0,
  with every capability dropped instead of a uid change.
- neither: refused (SandboxUnavailable) unless AGENT_UNSAFE_NO_SANDBOX=1 says to run without the wall.

Whatever the command does, run_sandboxed returns a SandboxResult; it never raises for it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal as _signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from agent.harness.wall import proctree, template
from agent.harness.wall.lockwait import LockWatch
from agent.harness.wall.spec import Isolation, contain_spec  # noqa: F401 (sandbox.contain_spec: its name here too)
from agent.harness.settings import settings

log = logging.getLogger(__name__)

_POLL_S = 0.05
_QUEUE_POLL_S = 0.2  # /proc/locks and the process tree, read this often while a GPU lock is watched
_TAIL_BYTES = 64 * 1024
CONTAIN = Path(__file__).with_name("contain.py")
NOBODY = 65534
UNSAFE_ENV = "AGENT_UNSAFE_NO_SANDBOX"

# Only these variables reach a command (then anything that looks like a secret is dropped anyway).
_KEEP_NAMES = {
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV",
    "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CC", "CXX", "CPATH", "LIBRARY_PATH",
    "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE",  # where the interpreter finds what the user installed
}
_KEEP_PREFIXES = (
    "LC_", "CUDA_", "NVIDIA_", "TRITON_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "CUBLAS_", "CUDNN_", "NCCL_",
    "OMP_", "MKL_", "KMP_", "OPENBLAS_", "NV_", "NSIGHT_", "NCU_",
)
# Compile caches are each command's own, under its HOME and private /tmp: one shared with the agent or another
# candidate would carry state from one to the next. torch sets TORCHINDUCTOR_CACHE_DIR in this process's environment
# when it first imports torch._dynamo (the offline proposer's fx trace): passed on, it changed every later worker's
# environment, so the key of the warm template they fork from (a second template started, 5-6 s of an H200 round).
_OWN_CACHES = {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TRITON_HOME"}
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT", re.I)
_SECRET_PREFIXES = ("OPENAI_", "ANTHROPIC_", "AWS_", "AZURE_", "GOOGLE_", "GITHUB_", "GH_", "HF_", "HUGGING")
class SandboxUnavailable(RuntimeError):
    """This machine refuses every kind of namespace: candidates cannot be contained here."""


class Deadline:
    """A time limit armed after the command started (agent.harness.prewarm: a worker starts before its job exists).
    Until `arm`, only the hard cap given to run_sandboxed applies; `cancel` ends the command at once. `extend`: more
    seconds granted while it runs (CPU mode: a pass per autotune config), read at each poll; never past the cap."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.extend: Callable[[], float] | None = None

    def arm(self, seconds: float, extend: Callable[[], float] | None = None) -> None:
        self.at = time.monotonic() + seconds
        self.extend = extend

    def cancel(self) -> None:
        self.at, self.extend = time.monotonic(), None

    def passed(self, grace_s: float = 0.0) -> bool:
        if self.at is None:
            return False
        extra = self.extend() if self.extend is not None else 0.0
        return time.monotonic() > self.at + grace_s + extra


class SandboxResult(BaseModel):
    returncode: int | None = None
    signal: str | None = None
    timed_out: bool = False
    killed: str | None = None  # "timeout" | "memory" | "output": why the sandbox killed the command
    contained: bool = True  # False: the wall could not be built (contain.py exited 125), the command never ran
    stdout: str = ""
    stderr: str = ""
    stdout_path: Path | None = None
    stderr_path: Path | None = None
    wall_s: float = 0.0
    queued_s: float = 0.0  # of wall_s, queued behind other evaluations for the GPU's lock (not held against it)
    peak_rss_mb: float = 0.0
    isolation: str = "none"  # "namespaces" | "user-namespaces" | "none"
    warm: bool = False  # forked from a template (agent.harness.wall.template), not started afresh

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.killed is None


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment reduced to what tools need, without anything that looks like a secret."""
    env = {k: v for k, v in os.environ.items()
           if (k in _KEEP_NAMES or k.startswith(_KEEP_PREFIXES)) and k not in _OWN_CACHES}
    env.update(extra or {})
    return {k: v for k, v in env.items() if not SECRET_NAME.search(k) and not k.upper().startswith(_SECRET_PREFIXES)}


def _command_env(extra: dict[str, str] | None) -> dict[str, str]:
    """A sandboxed command's environment but its per-job HOME and TMPDIR (a warm template's key: prestart)."""
    return {**clean_env(extra), "PYTHONDONTWRITEBYTECODE": "1"}


def _unshare_cmd(flags: list[str]) -> list[str]:
    return ["unshare", *flags, "--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc", "--mount", "--net", "--"]


@lru_cache(maxsize=1)
def probe() -> Isolation:
    """The strongest wall this machine allows (probed once, by building it around `true`)."""
    tries: list[tuple[str, list[str], int | None]] = []
    if os.geteuid() == 0:
        tries.append(("namespaces", [], NOBODY))
    tries.append(("user-namespaces", ["--user", "--map-root-user"], None))
    why = ""
    for kind, flags, uid in tries:
        iso = Isolation(kind=kind, unshare=_unshare_cmd(flags), uid=uid)
        with tempfile.TemporaryDirectory(prefix="agent-probe-") as d:
            work = Path(d)
            try:
                if uid is not None:
                    os.chown(work, uid, uid)
            except OSError as e:  # inside a user namespace of ours, uid 65534 is not mapped: no uid to drop to
                why = str(e)
                continue
            spec = contain_spec(work, iso, {"core": 0})
            cmd = [*iso.unshare, sys.executable, "-I", "-S", str(CONTAIN), json.dumps(spec), "--", "true"]
            try:
                r = subprocess.run(cmd, capture_output=True, timeout=30, env=clean_env())
            except (OSError, subprocess.TimeoutExpired) as e:
                why = str(e)
                continue
            if r.returncode == 0:
                return iso
            lines = r.stderr.decode(errors="replace").strip().splitlines()
            why = lines[-1] if lines else f"exit status {r.returncode}"
            log.debug("sandbox probe %s refused: %s", kind, why)
    if os.environ.get(UNSAFE_ENV) == "1":
        log.warning("no namespaces here and %s=1: candidates run WITHOUT their wall", UNSAFE_ENV)
        return Isolation(kind="none", uid=NOBODY if os.geteuid() == 0 else None)
    raise SandboxUnavailable(
        f"cannot contain candidates on this machine ({why}): enable unprivileged user namespaces, or set "
        f"{UNSAFE_ENV}=1 to run candidates unconfined")


def isolation() -> str:
    """What run_sandboxed gives on this machine: 'namespaces', 'user-namespaces' or 'none'."""
    try:
        return probe().kind
    except SandboxUnavailable:
        return "none"


def prestart(env: dict[str, str] | None = None) -> bool:
    """Start now the warm template run_sandboxed would fork a worker with `env` from (agent.harness.wall.template);
    whether one is live. Never raises: a template that cannot start leaves workers to start cold, as they would."""
    try:
        return template.templates.prestart(_command_env(env), probe())
    except Exception as e:  # SandboxUnavailable, OSError: the first real job says so
        log.debug("no template started ahead: %s", e)
        return False


def run_sandboxed(
    argv: list[str],
    *,
    workdir: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
    memory_mb: int | None = None,
    output_limit_bytes: int = 1 << 20,
    address_space_limit: bool = False,
    file_limit_mb: int | None = None,
    hide: Sequence[Path] = (),
    expose: Sequence[Path] = (),
    deadline: Deadline | None = None,
    queue_lock: Path | None = None,
) -> SandboxResult:
    """Run argv in workdir behind the wall; never raises for anything the command does.

    memory_mb: resident memory of the whole process tree, polled (also RLIMIT_AS when address_space_limit, for
    CPU-only commands: CUDA reserves a huge address space). stdout/stderr go to workdir/stdout.log and
    stderr.log; more than output_limit_bytes in total kills the command. `hide`: more directories to mask
    (a store elsewhere); `expose`: more paths to keep visible, read-only (a lock directory); `deadline`: a limit
    armed later (timeout_s stays the hard cap); `queue_lock`: a GPU lock whose queue the limits do not count
    (agent.harness.wall.lockwait), up to `max_queue_s` of settings. Raises SandboxUnavailable where no wall can be built at all (see the module doc).
    Over 80 lines: one process's life, start to reaping, with the limits that watch it, read in the order they act."""
    cfg = settings().sandbox
    iso = probe()
    workdir = Path(workdir).resolve()
    home, tmp = workdir / "home", workdir / "tmp"
    for d in (workdir, home, tmp):
        d.mkdir(parents=True, exist_ok=True)
    limits = {"core": 0, "fsize": (file_limit_mb or cfg.file_limit_mb) << 20, "nproc": cfg.max_processes,
              "cpu": int(timeout_s * (os.cpu_count() or 1)) + 60}
    if memory_mb and address_space_limit:
        limits["as"] = memory_mb << 20
    exe = shutil.which(str(argv[0])) if argv else None
    if exe:  # the command itself stays reachable wherever it lives (an ncu in /var/tmp or under HOME)
        expose = [*expose, Path(exe).resolve().parent]
    spec = contain_spec(workdir, iso, limits, hide, expose)
    if iso.uid is not None:
        _chown_tree(workdir, iso.uid)
    full_env = {**_command_env(env), "HOME": str(home), "TMPDIR": str(tmp)}
    cmd = [*iso.unshare, sys.executable, "-I", "-S", str(CONTAIN), json.dumps(spec), "--", *[str(a) for a in argv]]

    out_path, err_path = workdir / "stdout.log", workdir / "stderr.log"
    result = SandboxResult(stdout_path=out_path, stderr_path=err_path, isolation=iso.kind)
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            proc: proctree.Proc | None = template.templates.start(argv, spec, full_env, out.fileno(), err.fileno(), iso)
            result.warm = proc is not None
            if proc is None:
                proc = subprocess.Popen(cmd, cwd=workdir, env=full_env, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=err, start_new_session=True, preexec_fn=proctree.dies_with_parent())
        except OSError as e:
            result.returncode, result.stderr = 127, f"could not start {argv[0]}: {e}"
            return result
        proctree.started(proc)
        watch, checked = (LockWatch(queue_lock) if queue_lock is not None else None), start
        try:
            while True:
                try:
                    proc.wait(timeout=_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                rss = proctree.rss_mb(proc.pid)
                result.peak_rss_mb = max(result.peak_rss_mb, rss)
                now = time.monotonic()
                if watch is not None and now - checked >= _QUEUE_POLL_S:
                    if result.queued_s < cfg.max_queue_s and watch.queued(proc.pid):
                        result.queued_s = min(cfg.max_queue_s, result.queued_s + now - checked)
                    checked = now
                grace = result.queued_s
                if now - start - grace > timeout_s or (deadline is not None and deadline.passed(grace)):
                    result.killed, result.timed_out = "timeout", True
                elif memory_mb and rss > memory_mb:
                    result.killed = "memory"
                elif _size(out_path) + _size(err_path) > output_limit_bytes:
                    result.killed = "output"
                if result.killed:
                    break
        finally:
            proctree.kill(proc)
            proctree.ended(proc)
    result.wall_s = time.monotonic() - start
    rc = proc.returncode
    if rc is not None and rc < 0:
        result.signal = _signal_name(-rc)
    elif rc is not None and iso.unshare and 128 < rc < 128 + 65:
        result.signal = _signal_name(rc - 128)  # contain.py's init reports a killed command as 128 + signal
    result.returncode = rc
    result.stdout, result.stderr = _tail(out_path), _tail(err_path)
    if rc == 125 and "agent sandbox: cannot contain" in result.stderr:
        result.contained = False
    return result


def hand_over(workdir: Path) -> None:
    """Files written into a running command's workdir become the command's (it runs unprivileged)."""
    uid = probe().uid
    if uid is not None:
        _chown_tree(Path(workdir).resolve(), uid)


def _chown_tree(root: Path, uid: int) -> None:
    """The unprivileged command must write its workdir (only its workdir: the rest of the tree is read-only)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            try:
                os.lchown(name, uid, uid)
            except OSError:
                pass


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - _TAIL_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _signal_name(num: int) -> str:
    try:
        return _signal.Signals(num).name
    except ValueError:
        return f"signal {num}"
