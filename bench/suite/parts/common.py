"""What every part of the benchmark shares: running a child process under a deadline, the problem and stage, and
short summaries of candidates and profiles. Nothing heavy is imported at module level: tests import it on the CPU."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent.parent
REPO = BENCH.parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bench_summary as S  # noqa: E402  (pure helpers, stdlib only)

GRACE_S = 10.0  # a part returns this long before its hard timeout
NVTX_RANGE = "bench_items"
ITEMS = ("eager", "compile", "seed", "best_mf")
NCU_METRICS = (S.DURATION, S.DRAM, S.GRID)



# ---------------------------------------------------------------- processes


def children_map() -> dict[int, list[int]]:
    """ppid -> pids of live processes (from /proc)."""
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] in (b"Z", b"X"):
                continue
            kids.setdefault(int(fields[1]), []).append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return kids


def descendants(pid: int) -> list[int]:
    """Every live process started (directly or not) by `pid`."""
    kids, out, todo = children_map(), [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            if c not in out:
                out.append(c)
                todo.append(c)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and everything it started (sandboxed workers run in sessions of their own, so a process
    group kill would miss them): freeze the tree first so nothing new is spawned while it is listed."""
    seen: list[int] = []
    for _ in range(2):
        for p in [pid, *descendants(pid)]:
            if p not in seen:
                seen.append(p)
                try:
                    os.kill(p, signal.SIGSTOP)
                except (ProcessLookupError, PermissionError):
                    pass
    for p in seen:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_until(cmd: list[str], *, deadline: float, cwd: Path, env: dict[str, str], stdout: Path, stderr: Path,
              interrupt_first: bool = False) -> tuple[int | None, bool, float]:
    """Run cmd until it exits or `deadline` (time.monotonic); then SIGINT (if interrupt_first: `agent run` records
    the run as interrupted and kills its sandboxed worker) and, 8 s later, kill the tree.
    Returns (returncode or None, cut by the deadline, wall seconds)."""
    t0 = time.monotonic()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        cut = False
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            cut = True
            if interrupt_first:
                try:
                    os.kill(proc.pid, signal.SIGINT)
                    proc.wait(timeout=8)
                except (subprocess.TimeoutExpired, ProcessLookupError):
                    pass
        finally:
            if proc.poll() is None or descendants(proc.pid):
                kill_tree(proc.pid)
            proc.wait()
    return (None if cut else proc.returncode), cut, time.monotonic() - t0


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(REPO)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra or {})
    return env


def tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def left(deadline: float) -> float:
    return deadline - time.monotonic()


# ---------------------------------------------------------------- shared building blocks


def _problem():
    from agent.problems import load_problem

    return load_problem("gap44")


def _stage(name: str = "memory-fusion"):
    from agent.stages import get_stage

    return get_stage(name)


def _sizes(problem, device: str):
    return problem.sizes if device == "cuda" else problem.cpu_sizes


def first_line(text: str | None, n: int = 200) -> str:
    for ln in (text or "").strip().splitlines():
        if ln.strip() and not ln.strip().startswith("```"):
            return ln.strip()[:n]
    return ""


def profile_summary(prof) -> dict[str, Any] | None:
    """A Profile as the tables need it: the candidate's kernels, their summed time, the longest one's DRAM %."""
    if prof is None or not prof.kernels:
        return None
    ks = list(prof.kernels.values())
    dur = [float(k.metrics.get(S.DURATION, 0.0)) for k in ks]
    longest = ks[max(range(len(ks)), key=lambda i: dur[i])]
    return {
        "kernels": [k.name for k in ks], "launches": sum(k.launches for k in ks),
        "gap_us": sum(dur) / 1e3 if any(dur) else None,
        "longest": longest.name, "longest_us": float(longest.metrics.get(S.DURATION, 0.0)) / 1e3 or None,
        "gap_dram_pct": longest.metrics.get(S.DRAM), "grid": longest.metrics.get(S.GRID),
        "bottleneck": prof.bottleneck.reason if prof.bottleneck else None,
        "metric_set": prof.metric_set, "wall_s": prof.wall_s, "gpu": prof.gpu,
        "metrics": {k.name: dict(k.metrics) for k in ks},
    }


def candidate_summary(c) -> dict[str, Any]:
    r, t = c.result, c.result.timing
    d: dict[str, Any] = {
        "id": c.id, "iteration": c.iteration, "index": c.index, "stage": c.stage, "verdict": str(r.verdict),
        "message": first_line(r.message, 240), "duration_s": r.duration_s, "kernels": list(r.kernels),
        "why": first_line(c.answer.text if c.answer and c.answer.model != "start" else "starting kernel", 240),
        "profile": profile_summary(c.profile),
    }
    if t is not None:
        d.update(ms=t.candidate_ms, spread_pct=t.candidate_spread_pct, wall_ms=t.wall_ms, eager_ms=t.eager_ms,
                 eager_spread_pct=t.eager_spread_pct, compile_ms=t.compile_ms, compile_spread_pct=t.compile_spread_pct,
                 speedup_vs_eager=t.speedup_vs_eager, speedup_vs_compile=t.speedup_vs_compile, repeats=t.repeats,
                 timing_note=t.note)
    return d


