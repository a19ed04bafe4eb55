"""Run any command isolated: private /tmp and no network (namespaces), temp cwd and HOME, no secrets in the
environment, a wall-clock timeout that kills the whole process group, memory / file / output limits.

As root, `unshare --net --mount --fork` gives the command its own mount and network namespaces: a tmpfs on
/tmp (the workdir, if it lies under /tmp, is bound back at the same path) and only a loopback interface. Where
that is refused, an unprivileged user namespace is tried, and failing that the command runs without namespaces
(logged once as a warning). Limits: RLIMIT_CORE=0 and RLIMIT_FSIZE always; RLIMIT_AS only when asked
(CPU mode: CUDA reserves a huge address space), otherwise the group's resident memory is polled.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal as _signal
import subprocess
import time
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from agent.harness.settings import settings

log = logging.getLogger(__name__)

_POLL_S = 0.05
_TAIL_BYTES = 64 * 1024

# Only these variables reach a candidate (then anything that looks like a secret is dropped anyway).
_KEEP_NAMES = {
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH", "LD_PRELOAD_PATH", "PYTHONPATH", "VIRTUAL_ENV",
    "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CC", "CXX", "CPATH", "LIBRARY_PATH", "PYENV_VERSION", "PYENV_ROOT",
}
_KEEP_PREFIXES = (
    "LC_", "CUDA_", "NVIDIA_", "TRITON_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "CUBLAS_", "CUDNN_", "NCCL_",
    "OMP_", "MKL_", "KMP_", "OPENBLAS_", "NV_", "NSIGHT_", "NCU_",
)
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.I)
_SECRET_PREFIXES = ("OPENAI_", "ANTHROPIC_", "AWS_", "AZURE_", "GOOGLE_", "GITHUB_", "GH_", "HF_", "HUGGING")


class SandboxResult(BaseModel):
    returncode: int | None = None
    signal: str | None = None
    timed_out: bool = False
    killed: str | None = None  # "timeout" | "memory" | "output": why the sandbox killed the group
    stdout: str = ""
    stderr: str = ""
    stdout_path: Path | None = None
    stderr_path: Path | None = None
    wall_s: float = 0.0
    peak_rss_mb: float = 0.0
    isolation: str = "none"  # "namespaces" | "user-namespaces" | "none"

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.killed is None


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment reduced to what tools need, without anything that looks like a secret."""
    env = {k: v for k, v in os.environ.items() if k in _KEEP_NAMES or k.startswith(_KEEP_PREFIXES)}
    env.update(extra or {})
    return {k: v for k, v in env.items() if not _SECRET.search(k) and not k.upper().startswith(_SECRET_PREFIXES)}


# The script that runs inside the new namespaces: a private /tmp, loopback up, exec. The new tmpfs is built aside
# (at $W/.ns-tmp), the paths the command needs from the real /tmp (its workdir, and our package or a virtualenv
# when they live under /tmp) are bound into it while still reachable, then it is moved over /tmp in one step.
_NS_SCRIPT = r"""
set -e
W="$1"; SIZE="$2"; KEEP="$3"; shift 3
N="$W/.ns-tmp"
mkdir -p "$N"
mount -t tmpfs -o "mode=1777,size=${SIZE}m" tmpfs "$N"
IFS=:
for P in $KEEP; do
  [ -n "$P" ] || continue
  mkdir -p "$N${P#/tmp}"
  mount --bind "$P" "$N${P#/tmp}"
done
unset IFS
mount --move "$N" /tmp
cd "$W"
(ip link set lo up || true) >/dev/null 2>&1
exec "$@"
"""


def _under_tmp(path: Path) -> bool:
    return path == Path("/tmp") or Path("/tmp") in path.parents


def keep_paths(workdir: Path) -> list[str]:
    """What must stay visible under the private /tmp: the workdir and, where they live in /tmp, our package,
    the interpreter's prefix (a virtualenv) and every import path, outermost only."""
    import sys

    import agent

    found = [workdir, Path(agent.__file__).resolve().parent.parent, Path(sys.prefix).resolve()]
    found += [Path(p).resolve() for p in sys.path if p]
    found += [Path(p).resolve() for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths = sorted({p for p in found if _under_tmp(p) and p != Path("/tmp") and p.exists()}, key=lambda p: len(p.parts))
    outer: list[Path] = []
    for p in paths:
        if not any(o in p.parents for o in outer):
            outer.append(p)
    return [str(p) for p in outer]


@lru_cache(maxsize=1)
def _namespace_flags() -> tuple[list[str], str]:
    """The unshare flags that work here (probed once), and the isolation they give."""
    unshare, sh = shutil.which("unshare"), shutil.which("sh")
    if unshare and sh:
        tries = ([["--net", "--mount", "--fork"]] if os.geteuid() == 0 else []) + [
            ["--user", "--map-root-user", "--net", "--mount", "--fork"]
        ]
        for flags in tries:
            probe = [unshare, *flags, "--", sh, "-c", "mount -t tmpfs -o size=1m tmpfs /tmp"]
            try:
                r = subprocess.run(probe, capture_output=True, timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if r.returncode == 0:
                return flags, ("user-namespaces" if "--user" in flags else "namespaces")
    log.warning("unshare is refused here: candidates run without a private /tmp and with network access")
    return [], "none"


def isolation() -> str:
    """What run_sandboxed gives on this machine: 'namespaces', 'user-namespaces' or 'none'."""
    return _namespace_flags()[1]


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
) -> SandboxResult:
    """Run argv in workdir, isolated and limited; never raises for anything the command does.

    memory_mb: resident memory of the whole process group, polled (and also RLIMIT_AS when
    address_space_limit, for CPU-only commands). stdout/stderr go to workdir/stdout.log and stderr.log;
    more than output_limit_bytes in total kills the group. The result carries their tails.
    """
    cfg = settings().sandbox
    workdir = Path(workdir).resolve()
    home, tmp = workdir / "home", workdir / "tmp"
    for d in (workdir, home, tmp):
        d.mkdir(parents=True, exist_ok=True)
    flags, kind = _namespace_flags()
    full_env = clean_env(env)
    full_env.update({"HOME": str(home), "TMPDIR": "/tmp" if flags else str(tmp), "PYTHONDONTWRITEBYTECODE": "1"})

    limits = ["--core=0", f"--fsize={(file_limit_mb or cfg.file_limit_mb) << 20}"]
    if memory_mb and address_space_limit:
        limits.append(f"--as={memory_mb << 20}")
    cmd = [str(a) for a in argv]
    if flags:
        cmd = [shutil.which("unshare") or "unshare", *flags, "--", shutil.which("sh") or "sh", "-c", _NS_SCRIPT,
               "sh", str(workdir), str(cfg.tmpfs_mb), ":".join(keep_paths(workdir)), *cmd]
    prlimit = shutil.which("prlimit")
    if prlimit:
        cmd = [prlimit, *limits, "--", *cmd]

    out_path, err_path = workdir / "stdout.log", workdir / "stderr.log"
    result = SandboxResult(stdout_path=out_path, stderr_path=err_path, isolation=kind)
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            proc = subprocess.Popen(
                cmd, cwd=workdir, env=full_env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True, preexec_fn=None if prlimit else _fallback_limits(limits),
            )
        except OSError as e:
            result.returncode, result.stderr = 127, f"could not start {argv[0]}: {e}"
            return result
        try:
            while True:
                try:
                    proc.wait(timeout=_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                elapsed = time.monotonic() - start
                rss = _group_rss_mb(proc.pid)
                result.peak_rss_mb = max(result.peak_rss_mb, rss)
                if elapsed > timeout_s:
                    result.killed, result.timed_out = "timeout", True
                elif memory_mb and rss > memory_mb:
                    result.killed = "memory"
                elif _size(out_path) + _size(err_path) > output_limit_bytes:
                    result.killed = "output"
                if result.killed:
                    _kill_group(proc.pid)
                    proc.wait()
                    break
        finally:
            _kill_group(proc.pid)  # whatever the command left behind dies with it
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            _await_group_exit(proc.pid)
    result.wall_s = time.monotonic() - start
    rc = proc.returncode
    if rc is not None and rc < 0:
        result.signal = _signal_name(-rc)
    result.returncode = rc
    result.stdout, result.stderr = _tail(out_path), _tail(err_path)
    return result


def _fallback_limits(limits: list[str]):
    """Without prlimit(1): the same limits from a preexec hook (not thread-safe, hence only the fallback)."""
    import resource

    names = {"--core": resource.RLIMIT_CORE, "--fsize": resource.RLIMIT_FSIZE, "--as": resource.RLIMIT_AS}

    def apply() -> None:
        for item in limits:
            flag, value = item.split("=")
            resource.setrlimit(names[flag], (int(value), int(value)))

    return apply


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, _signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _await_group_exit(pgid: int, timeout_s: float = 5.0) -> None:
    """Wait until no live process of the group is left (GPU memory is freed before the next command)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _group_members(pgid):
        time.sleep(0.02)


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of the group."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                pids.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def _group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in the group (the command and whatever it spawned)."""
    total = 0
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[2]) == pgid:  # fields after the command name: state ppid pgrp ... rss is the 22nd
                total += int(fields[21]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total / (1 << 20)


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
