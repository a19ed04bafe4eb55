"""The evaluation cascade, cheapest first: extract -> parse -> static policy -> (shared) reference ->
candidate worker in the sandbox -> parent-side comparison -> timing vs cached baselines.

Whatever a candidate does, these functions return an EvalResult: the agent process never dies of it.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.harness import extract, policy
from agent.harness.job import Device, WorkerResult, prepare_job, read_result, worker_argv, worker_env
from agent.harness.sandbox import SandboxResult, run_sandboxed
from agent.harness.settings import settings
from agent.harness.validate import Reference, compare
from agent.schema import EvalResult, ProblemSpec, SizeSet, Stage, Timing, Verdict

log = logging.getLogger(__name__)


class HarnessError(RuntimeError):
    """The harness itself cannot evaluate (the problem's reference failed): not the candidate's fault."""


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


def default_device() -> Device:
    """'cuda' when a CUDA device is usable, else 'cpu' (CPU mode: TRITON_INTERPRET=1)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _absent(req: EvalRequest) -> list[str]:
    if req.absent is not None:
        return req.absent
    try:
        from agent.stages import absent_triton_functions

        return list(absent_triton_functions())
    except ImportError:
        return policy.default_absent()


# ---------------------------------------------------------------- static stage


def _static(req: EvalRequest, device: Device) -> EvalResult | tuple[str, list[str]]:
    """A final EvalResult for what fails before running, else (code, kernel names)."""
    code = extract.extract_code(req.source)
    if code is None:
        return EvalResult(verdict=Verdict.NO_CODE, message=extract.why_no_code(req.source), device=device)
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        line = (e.text or "").strip()
        return EvalResult(verdict=Verdict.SYNTAX_ERROR, code=code, device=device,
                          message=f"line {e.lineno}: {e.msg}" + (f": `{line}`" if line else ""))
    except ValueError as e:  # e.g. null bytes
        return EvalResult(verdict=Verdict.SYNTAX_ERROR, code=code, device=device, message=str(e))
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


# ---------------------------------------------------------------- reference and baselines (shared, cached)

_ref_cache: dict[str, Reference] = {}
_base_cache: dict[str, WorkerResult] = {}
_lock = threading.Lock()


def _sizes(problem: ProblemSpec, device: Device) -> list[SizeSet]:
    return problem.sizes if device == "cuda" else problem.cpu_sizes


def _problem_key(problem: ProblemSpec, device: Device, seed: int, extra: str = "") -> str:
    h = hashlib.sha256(problem.path.read_bytes())
    h.update(json.dumps([s.model_dump() for s in _sizes(problem, device)], sort_keys=True).encode())
    h.update(f"{device}|{seed}|{settings().validation.distributions}|{extra}".encode())
    return f"{problem.name}-{h.hexdigest()[:16]}"


def _run_worker(workdir: Path, job_path: Path, device: Device, timeout_s: float, memory_mb: int | None) -> SandboxResult:
    cfg = settings().sandbox
    mem = memory_mb or (cfg.memory_mb_cpu if device == "cpu" else cfg.memory_mb_gpu)
    return run_sandboxed(
        worker_argv(job_path), workdir=workdir, timeout_s=timeout_s, env=worker_env(device), memory_mb=mem,
        output_limit_bytes=cfg.output_limit_bytes, address_space_limit=device == "cpu",
    )


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


def reference(problem: ProblemSpec, device: Device, seed: int = 0, time_eager: bool = False) -> Reference:
    """The truth for a problem (computed in a sandboxed worker that never sees candidate code; cached)."""
    key = _problem_key(problem, device, seed)
    with _lock:
        if key in _ref_cache:
            return _ref_cache[key]
        workdir = Path(tempfile.mkdtemp(prefix="agent-ref-"))
        try:
            job = prepare_job(workdir, "reference", problem, device=device, seed=seed, time_eager=time_eager)
            sb = _run_worker(workdir, job, device, settings().sandbox.reference_timeout_s, None)
            res = read_result(workdir / "result.json")
            if res is None or not res.ok:
                why = res.error.message if res and res.error else _sandbox_failure(sb)
                raise HarnessError(f"the reference for problem {problem.name} failed: {why}")
            ref = Reference(trials=res.trials, truths=_load_tensors(res.outputs_file, "truths", workdir),
                            eager_ms=res.eager.median_ms if res.eager else None)
            if len(ref.truths) != len(ref.trials):
                raise HarnessError(f"the reference for problem {problem.name} wrote no truths")
            _ref_cache[key] = ref
            return ref
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


def baseline(problem: ProblemSpec, device: Device, cache_dir: Path | None, seed: int = 0) -> WorkerResult | None:
    """Eager and torch.compile timings at the problem's timed size (GPU), cached per problem/size/GPU."""
    if device != "cuda":
        return None
    import torch

    key = _problem_key(problem, device, seed, f"{_gpu_name()}|{torch.__version__}|{settings().timing}")
    with _lock:
        if key in _base_cache:
            return _base_cache[key]
        cached = cache_dir / "baselines" / f"{key}.json" if cache_dir else None
        if cached and cached.exists():
            try:
                _base_cache[key] = WorkerResult.model_validate_json(cached.read_text())
                return _base_cache[key]
            except ValueError:
                pass
        workdir = Path(tempfile.mkdtemp(prefix="agent-base-"))
        try:
            job = prepare_job(workdir, "baseline", problem, device=device, seed=seed,
                              sizes=_sizes(problem, device)[:1])
            sb = _run_worker(workdir, job, device, settings().sandbox.baseline_timeout_s, None)
            res = read_result(workdir / "result.json")
            if res is None or not res.ok:
                log.warning("baseline timing for %s failed: %s", problem.name,
                            res.error.message if res and res.error else _sandbox_failure(sb))
                return None
            _base_cache[key] = res
            if cached:
                cached.parent.mkdir(parents=True, exist_ok=True)
                cached.write_text(res.model_dump_json(indent=2))
            return res
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------- one candidate


def _sandbox_failure(sb: SandboxResult) -> str:
    if sb.killed == "memory":
        return f"exceeded the memory limit ({sb.peak_rss_mb:.0f} MB resident)"
    if sb.killed == "output":
        return "printed more than the output limit"
    if sb.signal:
        return f"killed by {sb.signal}" + _trace_hint(sb.stderr)
    lines = [ln for ln in sb.stderr.strip().splitlines() if ln.strip()]
    return f"exit status {sb.returncode}" + (f": {lines[-1].strip()[:400]}" if lines else "")


def _trace_hint(stderr: str) -> str:
    """faulthandler's dump names the candidate's line: 'File ".../candidate.py", line 42 in kernel'."""
    import re

    hits = re.findall(r'File "[^"]*candidate\.py", line (\d+) in (\w+)', stderr)
    if not hits:
        return ""
    line, fn = hits[0]  # faulthandler prints the innermost frame first
    return f" (candidate line {line}, in {fn})"


def _run_candidate(req: EvalRequest, device: Device, code: str, kernels: list[str],
                   shared: Callable[[], tuple[Reference, WorkerResult | None]]) -> EvalResult:
    """Run the candidate's worker, then (after it, so the two can overlap in CPU mode) fetch the shared
    reference and baseline, and judge."""
    start = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="agent-eval-"))
    result = EvalResult(verdict=Verdict.RUNTIME_ERROR, message="", code=code, kernels=kernels, device=device)
    try:
        job = prepare_job(workdir, "evaluate", req.problem, code=code, device=device, seed=req.seed,
                          time_it=req.time_it)
        sb = _run_worker(workdir, job, device, req.timeout_s, req.memory_mb)
        res = read_result(workdir / "result.json")
        ref, base = shared()
        _judge(result, sb, res, ref, base, workdir, req.timeout_s, device)
    except HarnessError:
        raise
    except Exception as e:  # a harness bug must not take the agent down either
        log.exception("evaluating a candidate failed")
        result.verdict, result.message = Verdict.RUNTIME_ERROR, f"harness error: {type(e).__name__}: {e}"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result.duration_s = time.monotonic() - start
    return result


def _judge(result: EvalResult, sb: SandboxResult, res: WorkerResult | None, ref: Reference,
           base: WorkerResult | None, workdir: Path, timeout_s: float, device: Device) -> None:
    outputs = _load_tensors(res.outputs_file, "outputs", workdir) if res else []
    trials = res.trials[: len(outputs)] if res else []
    v = compare(ref, trials, outputs, res.config_labels if res else []) if trials else None
    if v is not None:
        result.checks = v.checks
    if v is not None and not v.passed and trials:
        # a wrong answer is the verdict even where the worker later crashed or hung (e.g. while timing)
        result.verdict, result.message = Verdict.INCORRECT, v.message
        return
    if sb.timed_out:
        phase = f" while {_phase_words(res.phase)}" if res else ""
        result.verdict, result.message = Verdict.TIMEOUT, f"no result within {timeout_s:g} s{phase}: an infinite loop or a far too slow kernel?"
        return
    if res is None or (not res.ok and res.error is None):
        result.verdict = Verdict.RUNTIME_ERROR
        result.message = "the candidate's process died: " + _sandbox_failure(sb)
        return
    if res.error is not None:
        result.verdict = Verdict.COMPILE_ERROR if res.error.kind == "compile_error" else Verdict.RUNTIME_ERROR
        result.message = f"{_phase_words(res.error.phase)}: {res.error.message}"
        return
    if v is None:
        result.verdict, result.message = Verdict.RUNTIME_ERROR, "the candidate produced no outputs"
        return
    if res.kernels_tracked and not res.kernels_launched:
        result.verdict = Verdict.RULE_VIOLATION
        result.message = (f"forward never launched the candidate's Triton kernels ({', '.join(res.kernels_tracked)}): "
                          "the work must be done in Triton, not by PyTorch beside an unused kernel")
        return
    result.verdict, result.message = Verdict.CORRECT, v.message
    if res.timing is not None:
        result.timing = _timing(res, ref, base, device)


def _phase_words(phase: str) -> str:
    return {
        "import": "loading the module", "build": "building ModelNew", "validate": "running forward",
        "timing": "timing", "start": "starting", "done": "finishing",
    }.get(phase, phase)


def _timing(res: WorkerResult, ref: Reference, base: WorkerResult | None, device: Device) -> Timing:
    t = res.timing
    assert t is not None
    eager = base.eager if base else None
    comp = base.compiled if base else None
    eager_ms = eager.median_ms if eager else ref.eager_ms
    notes = [n for n in (t.note, base.compile_note if base else "") if n]
    return Timing(
        candidate_ms=t.median_ms, candidate_spread_pct=t.spread_pct, wall_ms=t.wall_ms,
        eager_ms=eager_ms, eager_spread_pct=eager.spread_pct if eager else None,
        compile_ms=comp.median_ms if comp else None, compile_spread_pct=comp.spread_pct if comp else None,
        speedup_vs_eager=eager_ms / t.median_ms if eager_ms and t.median_ms > 0 else None,
        speedup_vs_compile=comp.median_ms / t.median_ms if comp and t.median_ms > 0 else None,
        repeats=t.repeats, meaningful=device == "cuda", note="; ".join(notes),
    )


# ---------------------------------------------------------------- public entry points


def evaluate(req: EvalRequest) -> EvalResult:
    """Evaluate one answer: the verdict, a message an LLM can act on, checks and (if correct) timing."""
    return evaluate_many([req])[0]


def evaluate_many(reqs: list[EvalRequest]) -> list[EvalResult]:
    """Evaluate several answers, sharing one reference (and baseline) per problem/sizes/seed/device.

    GPU: candidates run one after another (their timings must not overlap). CPU mode: in parallel.
    """
    start = time.monotonic()
    results: list[EvalResult | None] = [None] * len(reqs)
    runnable: list[tuple[int, EvalRequest, Device, str, list[str]]] = []
    for i, req in enumerate(reqs):
        device = req.device or default_device()
        t0 = time.monotonic()
        static = _static(req, device)
        if isinstance(static, EvalResult):
            static.duration_s = time.monotonic() - t0
            results[i] = static
        else:
            runnable.append((i, req, device, *static))

    def shared(item: tuple[int, EvalRequest, Device, str, list[str]]) -> tuple[Reference, WorkerResult | None]:
        _, req, device, _, _ = item
        ref = reference(req.problem, device, req.seed, time_eager=device == "cpu")
        # Baselines are timed once per problem/size/GPU, not per round: their speed does not depend on the seed.
        return ref, (baseline(req.problem, device, req.cache_dir) if req.time_it else None)

    def run(item: tuple[int, EvalRequest, Device, str, list[str]]) -> None:
        i, req, device, code, kernels = item
        results[i] = _run_candidate(req, device, code, kernels, lambda: shared(item))

    # GPU: reference and baseline first, then one candidate at a time (timings must not overlap).
    for item in (r for r in runnable if r[2] == "cuda"):
        shared(item)
        run(item)
    # CPU mode: candidates run in parallel, and the (cached, locked) reference alongside the first of them.
    cpu = [r for r in runnable if r[2] == "cpu"]
    if cpu:
        with ThreadPoolExecutor(max_workers=max(1, min(len(cpu) + 1, os.cpu_count() or 1))) as pool:
            for item in cpu[:1]:
                pool.submit(shared, item)
            list(pool.map(run, cpu))
    log.debug("evaluated %d candidates in %.1f s", len(reqs), time.monotonic() - start)
    return [r for r in results if r is not None]
