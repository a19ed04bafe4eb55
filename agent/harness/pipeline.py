"""The evaluation cascade, cheapest first: extract -> parse -> static policy -> (shared) reference -> candidate
worker behind the sandbox's wall -> the parent's judgement (outputs, trials, run-time rules, timed calls) -> timing.

The parent decides: it chooses the trials and the checked timed calls, requires a record for each, compares every
output with the fp64 truth itself and applies the run-time rules to what the worker recorded. Whatever a candidate
does, these functions return an EvalResult (secrets scrubbed from it): the agent process never dies of it.
"""

from __future__ import annotations

import ast
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.errors import HarnessError
from agent.harness import extract, policy
from agent.harness.job import (
    Device,
    TimingPlan,
    TrialSpec,
    WorkerResult,
    plan_timing,
    plan_trials,
    prepare_job,
    read_result,
    worker_argv,
    worker_env,
)
from agent.harness.judge import judge, sandbox_failure
from agent.harness.sandbox import SandboxResult, SandboxUnavailable, run_sandboxed
from agent.harness.settings import settings
from agent.harness.validate import Reference
from agent.redact import scrub
from agent.schema import EvalResult, ProblemSpec, SizeSet, Stage, Verdict

log = logging.getLogger(__name__)


class EvalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="an LLM answer (markdown) or plain Python code")
    problem: ProblemSpec
    stage: Stage
    device: Literal["cuda", "cpu"] | None = Field(default=None, description="None: cuda when available")
    timeout_s: float = Field(default_factory=lambda: settings().sandbox.timeout_s)
    time_it: bool = True
    cache_dir: Path | None = Field(default=None, description="where baseline timings are cached (None: memory only)")
    seed: int = 0
    absent: list[str] | None = Field(default=None, description="absent Triton functions (None: agent.stages')")
    memory_mb: int | None = None
    hide: list[Path] = Field(default_factory=list, description="more directories the candidate must not see (a store)")
    bandwidth_gbs: float | None = Field(default=None, description="the GPU's peak bandwidth (the timing floor)")
    gpu_lock: Path | None = Field(default=None, description="this GPU's lock, where several workers share the GPU")


def default_device() -> Device:
    """'cuda' when a CUDA device is usable, else 'cpu' (CPU mode: TRITON_INTERPRET=1)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _absent(req: EvalRequest) -> list[str]:
    if req.absent is not None:
        return req.absent
    from agent.stages import absent_triton_functions

    return list(absent_triton_functions())


# ---------------------------------------------------------------- static stage


def _static(req: EvalRequest, device: Device) -> EvalResult | tuple[str, list[str]]:
    """A final EvalResult for what fails before running, else (code, kernel names)."""
    code = extract.extract_code(req.source)
    if code is None:
        return EvalResult(verdict=Verdict.NO_CODE, message=extract.why_no_code(req.source), device=device)
    nul = extract.nul_position(code)
    if nul is not None:
        return EvalResult(verdict=Verdict.SYNTAX_ERROR, code=code.replace("\x00", "\\x00"), device=device,
                          message=f"line {nul[0]}, column {nul[1]}: the code contains a NUL byte (\\x00)")
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        line = (e.text or "").strip()
        return EvalResult(verdict=Verdict.SYNTAX_ERROR, code=code, device=device,
                          message=f"line {e.lineno}: {e.msg}" + (f": `{line}`" if line else ""))
    except (ValueError, RecursionError, MemoryError) as e:
        return EvalResult(verdict=Verdict.SYNTAX_ERROR, code=code, device=device, message=f"the code cannot be parsed: {e}")
    kernels = policy.kernel_names(code)
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.walk(tree)) and not any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in n.targets)
        for n in ast.walk(tree)
    ):
        return EvalResult(verdict=Verdict.NO_CODE, code=code, kernels=kernels, device=device,
                          message="the code defines no class ModelNew: the answer must define class ModelNew(nn.Module)")
    violations = policy.check(code, req.stage.rules, _absent(req))
    if violations:
        shown = "; ".join(str(v) for v in violations[:6])
        more = f" (+{len(violations) - 6} more)" if len(violations) > 6 else ""
        return EvalResult(verdict=Verdict.RULE_VIOLATION, message=shown + more, code=code, kernels=kernels, device=device)
    return code, kernels


# ---------------------------------------------------------------- one worker


def _sizes(problem: ProblemSpec, device: Device) -> list[SizeSet]:
    return problem.sizes if device == "cuda" else problem.cpu_sizes


def _run_worker(workdir: Path, job_path: Path, device: Device, timeout_s: float, memory_mb: int | None,
                hide: list[Path], gpu_lock: Path | None) -> SandboxResult:
    cfg = settings().sandbox
    mem = memory_mb or (cfg.memory_mb_cpu if device == "cpu" else cfg.memory_mb_gpu)
    env = worker_env(device)
    expose = []
    if gpu_lock is not None:  # the worker takes this GPU's lock: visible (read-only) inside the sandbox
        from agent.harness.gpulock import ensure

        ensure(gpu_lock)
        expose.append(gpu_lock.parent)
    try:
        sb = run_sandboxed(worker_argv(job_path), workdir=workdir, timeout_s=timeout_s, env=env, memory_mb=mem,
                           output_limit_bytes=cfg.output_limit_bytes, address_space_limit=device == "cpu",
                           hide=hide, expose=expose)
    except SandboxUnavailable as e:
        raise HarnessError(str(e), "candidates never run without their sandbox") from e
    if not sb.contained:
        why = sb.stderr.strip().splitlines()[-1] if sb.stderr.strip() else "?"
        raise HarnessError(f"the sandbox could not be built: {why}", "see agent/harness/contain.py for what it needs")
    return sb


def _load_tensors(path: Path | None, key: str, workdir: Path) -> list[list]:
    import torch

    if path is None:
        return []
    path = Path(path)
    if workdir.resolve() not in path.resolve().parents:  # a path the worker names must lie in its workdir
        return []
    try:
        return list(torch.load(path, map_location="cpu", weights_only=True)[key])
    except Exception as e:  # missing or corrupt: treated as no outputs
        log.debug("could not load %s: %s", path, e)
        return []


class Shared:
    """The truths and baselines a round's candidates share, computed once each (in workers that never see candidate
    code) and kept, bounded, by the evaluator that owns this object."""

    def __init__(self, max_entries: int = 8) -> None:
        self._refs: dict[tuple, Reference] = {}
        self._bases: dict[str, WorkerResult | None] = {}
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def reference(self, problem: ProblemSpec, device: Device, seed: int, trials: list[TrialSpec], plan: TimingPlan | None,
                  hide: list[Path], gpu_lock: Path | None = None, time_eager: bool = False) -> Reference:
        key = (problem.path, problem.path.read_bytes(), device, seed, tuple(t.model_dump_json() for t in trials),
               plan.model_dump_json() if plan else "")
        with self._lock:
            if key in self._refs:
                return self._refs[key]
            workdir = Path(tempfile.mkdtemp(prefix="agent-ref-"))
            try:
                job = prepare_job(workdir, "reference", problem, device=device, seed=seed, trials=trials, plan=plan,
                                  time_eager=time_eager, gpu_lock=gpu_lock)
                sb = _run_worker(workdir, job, device, settings().sandbox.reference_timeout_s, None, hide, gpu_lock)
                res = read_result(workdir / "result.json")
                if res is None or not res.ok:
                    why = res.error.message if res and res.error else sandbox_failure(sb)
                    raise HarnessError(f"the reference for problem {problem.name} failed: {why}",
                                       "the problem's own Model must run at every size: check the problem file")
                ref = Reference(trials=res.trials, truths=_load_tensors(res.outputs_file, "truths", workdir),
                                pool=_load_tensors(res.outputs_file, "pool", workdir),
                                eager_ms=res.eager.median_ms if res.eager else None)
                if len(ref.truths) != len(ref.trials) or [t.id for t in ref.trials] != [t.id for t in trials]:
                    raise HarnessError(f"the reference for problem {problem.name} wrote no truths",
                                       "the problem's own Model must return tensors")
                while len(self._refs) >= self.max_entries:
                    self._refs.pop(next(iter(self._refs)))
                self._refs[key] = ref
                return ref
            finally:
                shutil.rmtree(workdir, ignore_errors=True)

    def baseline(self, problem: ProblemSpec, device: Device, cache_dir: Path | None, hide: list[Path],
                 gpu_lock: Path | None = None) -> WorkerResult | None:
        """Eager and torch.compile timings at the problem's timed size (GPU), cached per problem/size/GPU."""
        if device != "cuda":
            return None
        import hashlib
        import json

        import torch

        h = hashlib.sha256(problem.path.read_bytes())
        h.update(json.dumps([s.model_dump() for s in _sizes(problem, device)], sort_keys=True).encode())
        h.update(f"{_gpu_name()}|{torch.__version__}|{settings().timing}".encode())
        name = f"{problem.name}-{h.hexdigest()[:16]}"
        with self._lock:
            if name in self._bases:
                return self._bases[name]
            cached = cache_dir / "baselines" / f"{name}.json" if cache_dir else None
            if cached and cached.exists():
                try:
                    self._bases[name] = WorkerResult.model_validate_json(cached.read_text())
                    return self._bases[name]
                except ValueError:
                    pass
            workdir = Path(tempfile.mkdtemp(prefix="agent-base-"))
            try:
                sizes = _sizes(problem, device)[:1]
                job = prepare_job(workdir, "baseline", problem, device=device, sizes=sizes,
                                  trials=plan_trials(sizes, 0, ["problem"]), gpu_lock=gpu_lock)
                sb = _run_worker(workdir, job, device, settings().sandbox.baseline_timeout_s, None, hide, gpu_lock)
                res = read_result(workdir / "result.json")
                if res is None or not res.ok:
                    log.warning("baseline timing for %s failed: %s", problem.name,
                                res.error.message if res and res.error else sandbox_failure(sb))
                    self._bases[name] = None
                    return None
                self._bases[name] = res
                if cached:
                    try:
                        cached.parent.mkdir(parents=True, exist_ok=True)
                        cached.write_text(res.model_dump_json(indent=2))
                    except OSError as e:  # a read-only cache: timings are still right, only not remembered
                        log.debug("cannot cache the baseline: %s", e)
                return res
            finally:
                shutil.rmtree(workdir, ignore_errors=True)


def _gpu_name() -> str:
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i",
                              os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "cuda"
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "cuda"


# ---------------------------------------------------------------- one candidate


class _Job(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    req: EvalRequest
    device: Device
    code: str
    kernels: list[str]
    trials: list[TrialSpec]
    plan: TimingPlan | None


def _run_candidate(job: _Job, shared: Callable[[], tuple[Reference, WorkerResult | None]]) -> EvalResult:
    """Run the candidate's worker, then (after it, so the two can overlap in CPU mode) fetch the shared reference
    and baseline, and judge."""

    req, device = job.req, job.device
    start = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="agent-eval-"))
    result = EvalResult(verdict=Verdict.RUNTIME_ERROR, message="", code=job.code, kernels=job.kernels, device=device)
    try:
        path = prepare_job(workdir, "evaluate", req.problem, code=job.code, device=device, seed=req.seed,
                           trials=job.trials, plan=job.plan, gpu_lock=req.gpu_lock)
        sb = _run_worker(workdir, path, device, req.timeout_s, req.memory_mb, req.hide, req.gpu_lock)
        res = read_result(workdir / "result.json")
        ref, base = shared()
        outputs = _load_tensors(res.outputs_file, "outputs", workdir) if res else []
        timed = _load_tensors(res.outputs_file, "timing", workdir) if res else []
        judge(result, sb, res, ref, base, outputs, timed, job.trials, req, device)
    except HarnessError:
        raise
    except Exception as e:  # a harness bug must not take the agent down either
        log.exception("evaluating a candidate failed")
        result.verdict, result.message = Verdict.RUNTIME_ERROR, f"harness error: {type(e).__name__}: {e}"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result.duration_s = time.monotonic() - start
    return result


# ---------------------------------------------------------------- public entry points


def evaluate(req: EvalRequest, shared: Shared | None = None) -> EvalResult:
    """Evaluate one answer: the verdict, a message an LLM can act on, checks and (if correct) timing."""
    return evaluate_many([req], shared)[0]


def evaluate_many(reqs: list[EvalRequest], shared: Shared | None = None) -> list[EvalResult]:
    """Evaluate several answers, sharing one reference (and baseline) per problem/sizes/seed/device (`shared` keeps
    them across calls; by default they live for this call only).

    GPU: candidates run one after another (their timings must not overlap). CPU mode: in parallel.
    """
    shared = shared or Shared()
    results: list[EvalResult | None] = [None] * len(reqs)
    runnable: list[tuple[int, _Job]] = []
    plans: dict[tuple, tuple[list[TrialSpec], TimingPlan | None]] = {}
    for i, req in enumerate(reqs):
        device = req.device or default_device()
        t0 = time.monotonic()
        static = _static(req, device)
        if isinstance(static, EvalResult):
            static.duration_s = time.monotonic() - t0
            results[i] = static
            continue
        key = (req.problem.path, device, req.seed, req.time_it)
        if key not in plans:  # one plan per problem/seed/device: the round's candidates share one truth
            trials = plan_trials(_sizes(req.problem, device), req.seed, settings().validation.distributions)
            plans[key] = (trials, plan_timing(device, req.seed) if req.time_it else None)
        trials, plan = plans[key]
        runnable.append((i, _Job(req=req, device=device, code=static[0], kernels=static[1], trials=trials, plan=plan)))

    def truth(job: _Job) -> tuple[Reference, WorkerResult | None]:
        r = job.req
        ref = shared.reference(r.problem, job.device, r.seed, job.trials, job.plan, r.hide, r.gpu_lock,
                               time_eager=job.device == "cpu")
        # Baselines are timed once per problem/size/GPU, not per round: their speed does not depend on the seed.
        return ref, (shared.baseline(r.problem, job.device, r.cache_dir, r.hide, r.gpu_lock) if r.time_it else None)

    def run(item: tuple[int, _Job]) -> None:
        i, job = item
        results[i] = _run_candidate(job, lambda: truth(job))

    # GPU: reference and baseline first, then one candidate at a time (timings must not overlap).
    for item in (r for r in runnable if r[1].device == "cuda"):
        truth(item[1])
        run(item)
    # CPU mode: candidates run in parallel, and the (cached, locked) reference alongside the first of them.
    cpu = [r for r in runnable if r[1].device == "cpu"]
    if cpu:
        with ThreadPoolExecutor(max_workers=max(1, min(len(cpu) + 1, os.cpu_count() or 1))) as pool:
            first = pool.submit(truth, cpu[0][1])
            list(pool.map(run, cpu))
            first.result()
    out = [r for r in results if r is not None]
    for r in out:
        r.message = scrub(r.message)
        for c in r.checks:
            c.note = scrub(c.note)
    return out
