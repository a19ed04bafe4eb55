"""The evaluation cascade, cheapest first: extract -> parse -> static policy -> (shared) reference -> candidate
worker behind the sandbox's wall -> the parent's judgement (outputs, trials, run-time rules, timed calls) -> timing.

The parent decides: it chooses the trials and the checked timed calls, requires a record for each, compares every
output with the fp64 truth itself and applies the run-time rules to what the worker recorded. Whatever a candidate
does, these functions return an EvalResult (secrets scrubbed from it): the agent process never dies of it.
Over 400 lines: the cascade and the pool that runs a round's candidates side by side share its stages' order.
"""

from __future__ import annotations

import ast
import logging
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.errors import HarnessError
from agent.harness.static import extract, gpuonly, policy
from agent.harness.static.parsing import PARSING
from agent.harness.judge import kernelbench
from agent.harness.cache import salted
from agent.harness.job import (
    Device,
    TimingPlan,
    TrialSpec,
    WorkerResult,
    plan_timing,
    plan_trials,
    prepare_job,
    read_result,
)
from agent.harness.judge.verdict import judge
from agent.harness.wall.limit import ConfigPasses, Limit, limit_for
from agent.harness.prewarm import Prewarm
from agent.harness.runner import load_tensors, run_job, sizes_for
from agent.harness.wall.sandbox import Deadline
from agent.harness.settings import settings
from agent.harness.judge.saturation import varied_trials
from agent.harness.shared import Shared
from agent.harness.judge.tiles import past_tile
from agent.harness.judge.validate import Reference
from agent.harness.worker.workerio import Gpu
from agent.printable import printable
from agent.redact import scrub
from agent.schema import EvalResult, Objective, OnResult, Precision, ProblemSpec, Stage, Verdict

log = logging.getLogger(__name__)


class EvalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="an LLM answer (markdown) or plain Python code")
    problem: ProblemSpec
    stage: Stage
    device: Literal["cuda", "cpu"] | None = Field(default=None, description="None: cuda when available")
    timeout_s: float | None = Field(default=None, description="the candidate's limit; None: scaled (harness.limit)")
    time_it: bool = True
    objective: Objective = Field(default="latency", description="the clock of candidate_ms and the plain speedups")
    precision: Precision = Field(default="fp32", description="the numerics the candidate is held to (tolerance)")
    energy: bool = Field(default=True, description="time energy per call too (GPU: NVML, blocks of about a second "
                         "each, the GPU held exclusively): a run asks for it only where it ranks by it")
    cache_dir: Path | None = Field(default=None, description="truths and baselines kept here across processes "
                                   "(None: memory only); never visible to candidates")
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


def default_gpu_lock() -> Path:
    """The lock of the GPU this process uses (the first of CUDA_VISIBLE_DEVICES, else 0): every process of this host
    evaluating or profiling on it takes it, so two runs on one GPU never time alongside each other's work."""
    from agent.harness.wall.gpulock import lock_path

    return lock_path(os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0")


def neighbours_fault(result: EvalResult | None) -> bool:
    """A verdict another candidate on the same GPU may have caused: killed while waiting for the lock (a neighbour
    hung holding it), or out of GPU memory (a neighbour took it)."""
    if result is None:
        return False
    if result.verdict == Verdict.TIMEOUT:
        return Gpu.WAIT in result.message
    return result.verdict == Verdict.RUNTIME_ERROR and "out of memory" in result.message.lower()


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
    coding = extract.declared_encoding(code)
    if coding is not None:
        return EvalResult(verdict=Verdict.RULE_VIOLATION, code=code, device=device,
                          message=f"line {coding[0]}: the code declares the encoding {coding[1]}: a kernel module is "
                                  "UTF-8 (the interpreter would decode the file otherwise than it was checked) "
                                  "[encoding]")
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
    unjudged = gpuonly.cpu_cannot_judge(code) if device == "cpu" else None
    if unjudged is not None:
        return EvalResult(verdict=Verdict.NEEDS_GPU, message=f"CPU mode cannot judge this answer: {unjudged}",
                          code=code, kernels=kernels, device=device)
    return code, kernels


# ---------------------------------------------------------------- one worker


# ---------------------------------------------------------------- one candidate


class _Job(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    req: EvalRequest
    device: Device
    code: str
    kernels: list[str]
    seed: int = Field(description="the request's seed, salted (agent.harness.cache.salted)")
    trials: list[TrialSpec] = Field(description="the round's trials, then this answer's own (`past`)")
    plan: TimingPlan | None
    static_s: float = 0.0
    round_problem: ProblemSpec | None = Field(default=None, description="the problem at the round's sizes, where "
                                              "req.problem holds `past`'s too (None: req.problem)")
    past: int = Field(default=0, description="trials of this answer's own at the end of `trials`: a size past its "
                                             "widest tile (agent.harness.judge.tiles)")

    def hide(self) -> list[Path]:
        """What the candidate must not see: the request's directories and the cache of truths."""
        return [*self.req.hide, *([self.req.cache_dir] if self.req.cache_dir else [])]


Truth = tuple[Reference, WorkerResult | None]


def _run_candidate(job: _Job, truth: Callable[[], Truth], limit: Callable[[], Limit],
                   warm: Prewarm | None = None) -> EvalResult:
    """Run the candidate's worker (`warm`: one started early, agent.harness.prewarm), then (after it, so the two can
    overlap in CPU mode) fetch the shared reference and baseline, and judge."""

    req, device = job.req, job.device
    start = time.monotonic()
    workdir = warm.workdir if warm is not None else Path(tempfile.mkdtemp(prefix="agent-eval-"))
    result = EvalResult(verdict=Verdict.RUNTIME_ERROR, message="", code=job.code, kernels=job.kernels, device=device)
    try:
        lim = limit()
        passes = ConfigPasses(workdir / "result.json", lim.seconds) if lim.per_pass else None
        # the ablated call's place among the calls is drawn per candidate, out of its sight (agent.harness.worker.ablation)
        ablate = secrets.choice(job.trials).id if job.trials else None
        path = prepare_job(workdir, "evaluate", req.problem, code=job.code, device=device, seed=job.seed,
                           trials=job.trials, plan=job.plan, gpu_lock=req.gpu_lock, publish=warm is None,
                           ablate=ablate)
        spawned = time.monotonic()
        if warm is not None:
            warm.release(lim.seconds, passes)
            started: Prewarm = warm
            warm = None  # released: it runs to its own end
            sb = started.wait()
        elif passes is not None:
            deadline = Deadline()
            deadline.arm(lim.seconds, passes)
            sb = run_job(workdir, path, device, lim.seconds * passes.most, req.memory_mb, job.hide(), req.gpu_lock,
                            deadline)
        else:
            sb = run_job(workdir, path, device, lim.seconds, req.memory_mb, job.hide(), req.gpu_lock)
        if passes is not None:
            lim = passes.limit(lim)
        exited = time.monotonic()
        res = read_result(workdir / "result.json")
        ref, base = truth()
        truth_s = time.monotonic() - exited
        outputs = load_tensors(res.outputs_file, "outputs", workdir) if res else []
        timed = load_tensors(res.outputs_file, "timing", workdir) if res else []
        ablated = load_tensors(res.outputs_file, "ablated", workdir) if res else []
        judge(result, sb, res, ref, base, outputs, timed, job.trials, req, device, lim,
              energy_pool=job.plan.energy_pool if job.plan else range(0), ablation=(ablate, ablated))
        result.phases = phases(job.static_s, spawned - start, spawned, exited, res.marks if res else {}, truth_s,
                               time.monotonic() - exited - truth_s, "exit" if res and res.ok else _last_phase(res),
                               res.waits if res else {})
    except HarnessError:
        raise
    except Exception as e:  # a harness bug must not take the agent down either
        log.exception("evaluating a candidate failed")
        result.verdict, result.message = Verdict.RUNTIME_ERROR, f"harness error: {type(e).__name__}: {e}"
    finally:
        if warm is not None:  # never released (the harness failed before): end it
            warm.cancel()
        shutil.rmtree(workdir, ignore_errors=True)
    result.duration_s = time.monotonic() - start + job.static_s
    return result


# The worker's marks (agent.harness.worker.workerio.mark), in order, each ending the phase named beside it.
_MARKS = (("main", "start"), ("ready", "imports"), ("imported", "load"), ("first", "compile"),
          ("validated", "validate"), ("timed", "timing"))


def _last_phase(res: WorkerResult | None) -> str:
    """The phase an unfinished worker was in, as `phases` names it (validating before the first call ended is
    compiling: the first call compiles the kernels)."""
    if res is None:
        return "start"
    if res.phase == "validate" and "first" not in res.marks:
        return "compile"
    return {"build": "imports", "import": "load"}.get(res.phase, res.phase)


# The phase each wait for the GPU's lock falls in (agent.harness.worker.candidate.evaluate takes the lock at those points).
_WAITS = {"shared": "imports", "exclusive": "timing"}


def marked_spans(order: tuple[tuple[str, str], ...], marks: dict[str, float], start: float,
                 end: float) -> tuple[dict[str, float], float]:
    """Seconds between a worker's marks (`order`: each mark and the phase it ends), each clamped into [start, end]
    (a worker's marks are its word, used for figures only), and the time of the last one found."""
    out, at = {}, start
    for mark, name in order:
        if mark in marks:
            t = min(max(marks[mark], at), end)
            out[name] = round(t - at, 3)
            at = t
    return out, at


def phases(static_s: float, before_s: float, spawned: float, exited: float, marks: dict[str, float], truth_s: float,
           judge_s: float, last: str = "exit", waits: dict[str, float] | None = None) -> dict[str, float]:
    """Seconds per phase of one evaluation, in order. The worker's marks are clamped into its lifetime (they are its
    word, used for figures only); the time after its last mark goes to `last`: `exit` for a worker that finished,
    else the phase it was in when it ended (a hang's seconds show where it hung). Waits for the GPU's lock (other
    candidates' GPU work) are taken out of their phase and shown as `gpu wait`."""
    spans, at = marked_spans(_MARKS, marks, spawned, exited)
    out = {"checks": round(static_s, 3), "prepare": round(before_s, 3), **spans}
    out[last] = round(out.get(last, 0.0) + exited - at, 3)
    waited = 0.0
    for kind, seconds in (waits or {}).items():
        name = _WAITS.get(kind, "")
        if name in out and seconds > 0:
            w = min(seconds, out[name])
            out[name] = round(out[name] - w, 3)
            waited += w
    if waited:
        out["gpu wait"] = round(waited, 3)
    out["truth"] = round(truth_s, 3)
    out["judge"] = round(judge_s, 3)
    return out


def shown(r: EvalResult) -> None:
    """Make `r`'s text fit to show and store: secrets scrubbed (agent.redact), control characters escaped
    (agent.printable). Every text here may quote the candidate (its exception, its output, its source line); the
    code itself is kept as it was evaluated, and escaped where it is drawn."""
    r.message = printable(scrub(r.message))
    for c in r.checks:
        c.note = printable(scrub(c.note))
    if r.timing is not None:
        r.timing.note = printable(scrub(r.timing.note))
        r.timing.energy_note = printable(scrub(r.timing.energy_note))
    r.phases = {printable(k): v for k, v in r.phases.items()}


# ---------------------------------------------------------------- public entry points


def evaluate(req: EvalRequest, shared: Shared | None = None, warm: Prewarm | None = None) -> EvalResult:
    """Evaluate one answer: the verdict, a message an LLM can act on, checks and (if correct) timing. `warm`: a
    worker started for it earlier (prewarm_for), used if it fits, ended if not."""
    return evaluate_many([req], shared, {0: warm} if warm is not None else None)[0]


def prewarm_for(req: EvalRequest, device: Device) -> Prewarm:
    """Start the worker of `req` now, before its checks (agent.harness.prewarm); hand it to `evaluate`."""
    cfg = settings().sandbox
    hide = [*req.hide, *([req.cache_dir] if req.cache_dir else [])]
    lock = req.gpu_lock or (default_gpu_lock() if device == "cuda" else None)
    per_pass = cfg.cpu_config_passes_timed if device != "cuda" else 1  # agent.harness.wall.limit.ConfigPasses
    return Prewarm(device, hide, lock, cap_s=cfg.reference_timeout_s + (req.timeout_s or cfg.timeout_s * per_pass),
                   memory_mb=req.memory_mb)


def evaluate_many(reqs: list[EvalRequest], shared: Shared | None = None,
                  warm: dict[int, Prewarm] | None = None, on_result: OnResult | None = None) -> list[EvalResult]:
    """Evaluate several answers, sharing one reference (and baseline) per problem/sizes/seed/device (`shared` keeps
    them across calls; by default they live for this call only). `warm`: workers started early for some of them
    (by index); whatever is not used is ended. `on_result(index, result)` is called (from a worker thread) as each
    verdict is final, so a caller can show it before the round ends.

    GPU: up to gpu_slots candidates at once behind the GPU's lock (timing exclusive). CPU mode: in parallel.
    """
    warm = dict(warm or {})
    try:
        return _evaluate_many(reqs, shared or Shared(), warm, on_result or (lambda i, r: None))
    finally:
        for w in warm.values():
            w.cancel()


def _evaluate_many(reqs: list[EvalRequest], shared: Shared, warm: dict[int, Prewarm],
                   on_result: OnResult) -> list[EvalResult]:
    """The round's candidates side by side. Over 80 lines: its closures share the pool, the results and the
    Prewarms, and run in the order a candidate's phases take."""
    results: list[EvalResult | None] = [None] * len(reqs)

    def final(i: int) -> None:
        r = results[i]
        if r is not None:
            shown(r)
            on_result(i, r)
    runnable: list[tuple[int, _Job]] = []
    plans: dict[tuple, tuple[int, int, list[TrialSpec], TimingPlan | None]] = {}
    for i, req in enumerate(reqs):
        device = req.device or default_device()
        if device == "cuda" and req.gpu_lock is None:  # every evaluation on a GPU takes that GPU's host-wide lock
            req = req.model_copy(update={"gpu_lock": default_gpu_lock()})
        t0 = time.monotonic()
        with PARSING:  # beside a profile started ahead, or the last round's verdicts
            static = _static(req, device)
        if isinstance(static, EvalResult):
            static.duration_s = time.monotonic() - t0
            results[i] = static
            final(i)
            continue
        key = (req.problem.path, device, req.seed, req.time_it, req.cache_dir, req.precision == "kernelbench",
               req.energy)
        if key not in plans:  # one plan per problem/seed/device: the round's candidates share one truth
            seed = salted(req.seed, req.cache_dir)
            # the inputs' seeds are not the weights': ModelNew's __init__ runs under the weights' seed and could
            # otherwise draw every trial's inputs itself (torch.initial_seed()), a copy no operator derived from them
            inputs = salted(req.seed, req.cache_dir, "inputs")
            sizes, drawn = sizes_for(req.problem, device), settings().validation.distributions
            if req.precision == "kernelbench":  # its own draws, nothing added: comparable with published results
                trials = kernelbench.trials(sizes, inputs)
            else:
                trials = plan_trials(sizes, inputs, drawn, settings().validation.wide_distribution)
                # where the truth saturates on every draw: inputs that keep it in range
                found = shared.varied(req.problem, sizes, drawn, device, req.hide, req.gpu_lock, req.cache_dir)
                trials += varied_trials(found, sizes, drawn, inputs, len(trials))
            plans[key] = (seed, inputs, trials, plan_timing(device, seed, req.energy) if req.time_it else None)
        seed, inputs, trials, plan = plans[key]
        with PARSING:  # past_tile reads the answer's tiles from its tree
            problem, past = (req.problem, []) if req.precision == "kernelbench" else \
                past_tile(req.problem, device, static[0], shared.widths(req.cache_dir), inputs, len(trials))
        runnable.append((i, _Job(req=req.model_copy(update={"problem": problem}), device=device, code=static[0],
                                 kernels=static[1], seed=seed, trials=trials + past, plan=plan,
                                 round_problem=req.problem, past=len(past), static_s=time.monotonic() - t0)))

    def truth(job: _Job) -> Truth:
        r, ours, problem = job.req, len(job.trials) - job.past, job.round_problem or job.req.problem
        ref = shared.reference(problem, job.device, job.seed, job.trials[:ours], job.plan, job.hide(),
                               r.gpu_lock, time_eager=job.device == "cpu", cache_dir=r.cache_dir)
        if job.past:  # the answer's own trials: their truths apart, at the sizes that hold them
            more = shared.reference(r.problem, job.device, job.seed, job.trials[ours:], None, job.hide(), r.gpu_lock,
                                    cache_dir=r.cache_dir)
            ref = Reference(trials=ref.trials + more.trials, truths=ref.truths + more.truths, pool=ref.pool,
                            eager_ms=ref.eager_ms)
        return ref, baseline(job)

    def baseline(job: _Job) -> WorkerResult | None:
        # Timed once per problem/size/GPU, not per round: their speed does not depend on the seed.
        r = job.req
        return shared.baseline(job.round_problem or r.problem, job.device, r.cache_dir, job.hide(), r.gpu_lock) \
            if r.time_it else None

    def limit(job: _Job, base: WorkerResult | None) -> Limit:
        return limit_for(job.req.problem.name, job.device, len(job.trials), job.plan is not None, base,
                         job.req.timeout_s)

    def run(item: tuple[int, _Job], base: WorkerResult | None = None) -> None:
        i, job = item
        w = warm.pop(i, None)
        if w is not None and not w.fits(job.device, job.hide(), job.req.gpu_lock):
            w.cancel()
            w = None
        results[i] = _run_candidate(job, lambda: truth(job), lambda: limit(job, base), w)
        if job.device == "cpu":
            final(i)

    # GPU: the round's truth and the baseline first, alone: computed beside the candidates, a candidate that takes the
    # GPU's memory would fail the round's truth, and with it the round (a candidate's own such failure is retried
    # alone below; the truth's is the harness's error). Then up to `gpu_slots` candidates at once, behind the GPU's
    # lock (their start-up, compiles and validation overlap; timing is exclusive). A candidate that met trouble only a
    # neighbour can cause (killed while it waited for the lock, out of GPU memory) is evaluated again, alone.
    gpu = [r for r in runnable if r[1].device == "cuda"]
    slots = min(len(gpu), settings().sandbox.gpu_slots)

    round_start = time.monotonic()

    def run_gpu(item: tuple[int, _Job], retry_of: float | None = None) -> None:
        """`retry_of`: the seconds of a first attempt that only met a neighbour's trouble."""
        queued = time.monotonic() - round_start  # waiting for a slot, and for the round's truth
        _, base = truth(item[1])
        run(item, base)
        result = results[item[0]]
        if result is None:
            return
        if slots > 1:
            result.phases = {"queued": round(queued, 3), **result.phases}
        if retry_of is not None:
            result.phases = {"retry": round(retry_of, 3), **result.phases}
        if retry_of is not None or not (slots > 1 and neighbours_fault(result)):  # else final after its retry
            final(item[0])

    if slots > 1:
        with ThreadPoolExecutor(max_workers=slots) as pool:
            list(pool.map(run_gpu, gpu))
        for item in gpu:
            attempt = results[item[0]]
            if attempt is not None and neighbours_fault(attempt):
                log.info("evaluating candidate %d again, alone: %s", item[0], printable(attempt.message))
                run_gpu(item, retry_of=attempt.duration_s)
    else:
        for item in gpu:
            run_gpu(item)
    # CPU mode: candidates run in parallel, and the (cached, locked) reference alongside the first of them.
    cpu = [r for r in runnable if r[1].device == "cpu"]
    if cpu:
        with ThreadPoolExecutor(max_workers=max(1, min(len(cpu) + 1, os.cpu_count() or 1))) as pool:
            first = pool.submit(truth, cpu[0][1])
            list(pool.map(run, cpu))
            first.result()
    return [r for r in results if r is not None]
