"""Part 6: throughput (where a candidate's seconds go, candidates per GPU-minute)."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from parts.common import _problem, _stage, left, profile_summary

# ---------------------------------------------------------------- part 6: throughput


def part_throughput(ctx: dict, deadline: float, save: Callable[[dict], None]) -> dict:
    """Seconds per candidate by phase: extraction + static checks in process; the sandboxed worker run cold and
    warm (JIT compile = the difference), evaluate without and with timing; ncu stage and full sets."""
    from agent.problems import starting_code

    device, work = ctx["device"], Path(ctx["work"])
    problem, stage = _problem(), _stage()
    mf = ctx.get("results", {}).get("mf_run", {})
    code_path = mf.get("best_code_path")
    code = Path(code_path).read_text() if code_path and Path(code_path).exists() else starting_code(problem)
    data: dict[str, Any] = {"code": "memory-fusion best" if code_path else "seed", "phases": {}}
    ph = data["phases"]
    ph.update(_static_phase(mf, code, stage))
    save(data)
    cold = _worker_phases(data, code, problem, device, deadline, save)
    if device == "cuda":
        _ncu_phases(data, code, problem, stage, work, cold, deadline, save)
    else:
        data["ncu"] = "skipped in CPU mode"
    return data


def _static_phase(mf: dict, code: str, stage: Any) -> dict:
    """Extraction + static checks, on every answer the memory-fusion run recorded (CPU only, in process)."""
    import ast as _ast

    from agent.harness.static import extract, policy
    from agent.stages import absent_triton_functions

    texts = []
    if mf.get("run_id"):
        from agent.store import Store

        with Store(mf["root"]) as store:
            texts = [a.text for a in store.answers(mf["run_id"])]
    texts = texts or [f"```python\n{code}\n```"]
    absent = absent_triton_functions()
    times = []
    for text in texts:
        t0 = time.perf_counter()
        c = extract.extract_code(text)
        if c is not None:
            try:
                _ast.parse(c)
                policy.kernel_names(c)
                policy.check(c, stage.rules, absent)
            except (SyntaxError, ValueError):
                pass
        times.append((time.perf_counter() - t0) * 1e3)
    return {"static_ms": statistics.median(times), "static_n": len(times)}


def _worker_phases(data: dict, code: str, problem: Any, device: str, deadline: float,
                   save: Callable[[dict], None]) -> float | None:
    """The worker, sandboxed as the harness runs it, four times in one workdir (one HOME and Triton cache): cold and
    warm profile mode, evaluate without and with timing. Returns the cold run's wall seconds."""
    from agent.harness.job import plan_timing, prepare_job, read_result
    from agent.harness.runner import run_job
    from agent.harness.settings import settings

    cfg = settings().sandbox
    workdir = Path(tempfile.mkdtemp(prefix="agent-bench-phases-"))
    runs: dict[str, Any] = {}

    def worker(label: str, mode: str, time_it: bool) -> float | None:
        if left(deadline) < 15:
            runs[label] = {"skipped": f"only {left(deadline):.0f} s left"}
            return None
        job = prepare_job(workdir, mode, problem, code=code, device=device,
                          plan=plan_timing(device, 0) if time_it else None)
        (workdir / "result.json").unlink(missing_ok=True)
        sb = run_job(workdir, job, device, min(cfg.timeout_s, left(deadline) - 5), None, [], None)
        res = read_result(workdir / "result.json")
        ok = res is not None and res.ok
        runs[label] = {"wall_s": sb.wall_s, "ok": ok, "isolation": sb.isolation,
                       **({} if ok else {"stderr_tail": sb.stderr[-600:], "error": res.error.message if res and res.error else None})}
        save(data)
        return sb.wall_s if ok else None

    data["worker_runs"] = runs
    cold = worker("profile mode, Triton cache cold", "profile", False)
    warm = worker("profile mode, Triton cache warm", "profile", False)
    val = worker("evaluate without timing, warm", "evaluate", False)
    timed = worker("evaluate with timing, warm", "evaluate", True)
    shutil.rmtree(workdir, ignore_errors=True)
    ph = data["phases"]
    ph["worker_cold_s"], ph["worker_warm_s"] = cold, warm
    ph["compile_s"] = cold - warm if cold and warm else None
    ph["validation_s"] = val - warm if val and warm else None
    ph["timing_s"] = timed - val if timed and val else None
    save(data)
    return cold


def _ncu_phases(data: dict, code: str, problem: Any, stage: Any, work: Path, cold: float | None, deadline: float,
                save: Callable[[dict], None]) -> None:
    """ncu through the agent's profiler, stage set then full set (each in a fresh sandbox: Triton cache cold)."""
    from agent.profiler import ProfileError, ProfileRequest, find_ncu, profile

    ph = data["phases"]
    if find_ncu() is None:
        data["ncu"] = "ncu not found"
    for metric_set in ("stage", "full"):
        if find_ncu() is None:
            break
        if left(deadline) < (15 if metric_set == "stage" else 25):
            ph[f"ncu_{metric_set}_s"] = None
            data[f"ncu_{metric_set}_skipped"] = f"only {left(deadline):.0f} s left"
            continue
        t0 = time.monotonic()
        try:
            prof = profile(ProfileRequest(code=code, problem=problem, stage=stage, metric_set=metric_set,
                                          out=work / f"throughput_{metric_set}.ncu-rep", timeout_s=left(deadline) - 3))
            ph[f"ncu_{metric_set}_s"] = time.monotonic() - t0
            ph[f"ncu_{metric_set}_ncu_wall_s"] = prof.wall_s
            ph[f"ncu_{metric_set}_added_s"] = prof.wall_s - cold if cold else None
            data[f"profile_{metric_set}"] = profile_summary(prof)
        except ProfileError as e:
            data[f"ncu_{metric_set}_error"] = f"{e.kind}: {e}"
        save(data)
