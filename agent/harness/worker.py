"""The process that runs inside the sandbox: `python -m agent.harness.worker JOB.json`.

Modes (see job.py):
- reference: the problem's own Model only (candidate code is never imported here): per trial the parent chose, the
  fp64 truth, the fp32 eager error under default flags, digests of the inputs, and for traced trials the PyTorch
  operators the Model runs; then the truths of the timing pool.
- evaluate: the candidate's ModelNew on the same trials (same seeds, same weights), outputs to a tensor file, what
  every call launched and (traced trials) wrote and ran; then, if asked, timing at the first size.
- baseline: eager and torch.compile timing of the problem's Model (no candidate), timed the same way.
- profile: one call of the candidate inside an NVTX range, for ncu (exit status and one stderr line).
The worker never judges: the parent compares outputs and applies the rules, so nothing the candidate does here can
fake a pass. Before the candidate is imported the worker deletes its job, keeps its own references to what it times
with, snapshots what the candidate could patch and installs an audit hook (agent.harness.trusted).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from agent.harness.inputs import build, copy_matching_weights, digest, flatten, is_float, make_inputs, refill, weights
from agent.harness.job import BUFFER_WORDS, TrialRecord, TrialSpec, WorkerError, WorkerJob, WorkerResult


class _Stop(Exception):
    """Raised after an error has been recorded: stop the mode, write the result."""


class _AutotunePasses:
    """CPU mode: @triton.autotune fails at launch under the interpreter (it benchmarks). Each pass runs every
    autotuner with one of its configs (through Triton's own single-config path), so all configs get validated."""

    def __init__(self) -> None:
        self.index = 0
        self.max_configs = 1
        self.labels: dict[int, str] = {}

    def install(self) -> None:
        from triton.runtime.autotuner import Autotuner

        original = Autotuner.run
        passes = self

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            configs = self.configs
            passes.max_configs = max(passes.max_configs, len(configs))
            chosen = configs[min(passes.index, len(configs) - 1)]
            passes.labels.setdefault(passes.index, str(chosen))
            self.configs = [chosen]
            try:
                return original(self, *args, **kwargs)
            finally:
                self.configs = configs

        Autotuner.run = run


class _Gpu:
    """This GPU's lock (agent.harness.gpulock) when AGENT_GPU_LOCK names one: shared for GPU work, exclusive for
    timing and profiling; it dies with the process. Without one (one evaluation at a time) it does nothing."""

    WAIT = "waiting for the GPU"  # the phase while blocked: a timeout there is not the candidate's

    def __init__(self) -> None:
        from agent.harness.gpulock import GpuLock

        self.lock = GpuLock.from_env()

    def take(self, how: str, result: WorkerResult | None = None, job: WorkerJob | None = None) -> None:
        if self.lock is None:
            return
        phase = result.phase if result is not None else ""
        if result is not None and job is not None:
            result.phase = self.WAIT
            _write(result, job)
        self.lock.exclusive() if how == "exclusive" else self.lock.shared()
        if result is not None and job is not None:
            result.phase = phase
            _write(result, job)  # a later kill must not read as a kill while waiting


GPU_WAIT = _Gpu.WAIT


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _error(exc: BaseException, phase: str, job: WorkerJob) -> WorkerError:
    """Classify and describe an exception, pointing at the candidate's innermost line involved."""
    chain, e = [], exc
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    compile_like = phase == "import" or any(
        type(x).__name__ == "CompilationError" or type(x).__module__.startswith("triton.compiler") for x in chain
    )
    line, src = None, ""
    cand = str(job.candidate_path) if job.candidate_path else None
    for x in chain:
        frames = [f for f in traceback.extract_tb(x.__traceback__) if cand and f.filename == cand]
        if frames:
            line, src = frames[-1].lineno, (frames[-1].line or "").strip()
            break
    root = chain[-1] if type(chain[0]).__name__ == "InterpreterError" else chain[0]
    text = str(root).strip().splitlines()
    msg = f"{type(root).__name__}: " + " | ".join(t.strip() for t in text[:4] if t.strip())
    if len(msg) > 600:
        msg = msg[:600] + " ..."
    if line is not None:
        msg += f" (candidate line {line}: `{src}`)"
    return WorkerError(kind="compile_error" if compile_like else "runtime_error", phase=phase, message=msg, line=line)


def _load_candidate(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("candidate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    return module


def _write(result: WorkerResult, job: WorkerJob) -> None:
    tmp = job.result_path.with_suffix(".tmp")
    tmp.write_text(result.model_dump_json())
    os.replace(tmp, job.result_path)


def _modules(job: WorkerJob) -> list[ModuleType]:
    from agent.problems import load_module

    return [load_module(job.problem_path, s.overrides) for s in job.sizes]


def _record(trial: TrialSpec, job: WorkerJob, inputs: list[Any], kind: str, outs: list[Any]) -> TrialRecord:
    import torch

    return TrialRecord(
        id=trial.id, size=job.sizes[trial.size].label, distribution=trial.distribution, buffer=BUFFER_WORDS[trial.buffer],
        input_shapes=[list(x.shape) for x in inputs if isinstance(x, torch.Tensor)], input_digests=[digest(x) for x in inputs],
        output_kind=kind, output_shapes=[list(o.shape) for o in outs],
        output_dtypes=[str(o.dtype).removeprefix("torch.") for o in outs],
    )


def _timed_base(job: WorkerJob, modules: list[ModuleType]) -> tuple[TrialSpec, list[Any]]:
    """The inputs the timed calls start from: the first trial at the first size (non-float inputs stay as they are)."""
    first = next(t for t in job.trials if t.size == 0)
    return first, make_inputs(modules[0], first.distribution, first.seed, job.device)


# ---------------------------------------------------------------- modes


def _reference(job: WorkerJob, result: WorkerResult, gpu: _Gpu) -> None:
    import copy

    import torch

    from agent.harness.trace import Tracker
    from agent.harness.trusted import Trusted
    from agent.harness.validate import rel_error

    result.phase = "reference"
    gpu.take("shared", result, job)
    trusted = Trusted(job.device)
    tracker = Tracker(trusted)
    modules = _modules(job)
    models = [build(m, m.Model, job.seed, job.device) for m in modules]
    models64 = [copy.deepcopy(m).double() for m in models]

    def truth_of(size: int, inputs: list[Any]) -> list[Any]:
        with torch.no_grad():
            _, truth = flatten(models64[size](*[x.double() if is_float(x) else x for x in inputs]))
        return [t.detach().to("cpu", torch.float64) for t in truth]

    truths: list[list[Any]] = []
    for trial in job.trials:
        inputs = make_inputs(modules[trial.size], trial.distribution, trial.seed, job.device)
        digests = [digest(x) for x in inputs]
        tracker.begin(trial.trace, inputs)
        with torch.no_grad(), (tracker.dispatch_mode() if trial.trace else contextlib.nullcontext()):
            kind, out32 = flatten(models[trial.size](*inputs))
        _, trace = tracker.end(out32)
        truth = truth_of(trial.size, inputs)
        _sync(job.device)
        if not out32 or len(truth) != len(out32):
            raise TypeError(f"the problem's Model returned {kind}: expected a Tensor or a tuple of Tensors")
        record = _record(trial, job, inputs, kind, out32)
        record.input_digests, record.trace = digests, trace
        record.eager_error = max(rel_error(o, t) for o, t in zip(out32, truth))
        result.trials.append(record)
        truths.append(truth)
    pool: list[list[Any]] = []
    if job.plan is not None:
        _, base = _timed_base(job, modules)
        for seed in job.plan.pool_seeds:
            refill(base, seed, job.device, trusted.normal_, trusted.generator)
            pool.append(truth_of(0, base))
    out = job.outputs_dir / "reference.pt"
    torch.save({"truths": truths, "pool": pool}, out)
    result.outputs_file = out
    if job.time_eager:
        from agent.harness.timing import Bench

        first, base = _timed_base(job, modules)
        with torch.no_grad():
            result.eager = Bench(lambda: models[0](*base), base, None, job.timing, trusted).cpu()


def _evaluate(job: WorkerJob, result: WorkerResult, gpu: _Gpu) -> None:
    import torch
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    from agent.harness.timing import Bench
    from agent.harness.trace import Tracker
    from agent.harness.trusted import Integrity, Trusted, guard

    passes = _AutotunePasses()
    if job.device == "cpu":
        passes.install()
    trusted = Trusted(job.device)
    tracker = Tracker(trusted)
    tracker.install()
    result.phase = "build"
    gpu.take("shared", result, job)  # everything before (interpreter, torch, triton imports) overlaps others' timing
    modules = _modules(job)
    states = [weights(m, job.seed, job.device) for m in modules]  # the problem's Models are gone before any candidate code runs
    gc.collect()
    integrity = Integrity({"JITFunction": JITFunction, "Autotuner": Autotuner, **tracker.hooked()})
    refusals: list[str] = []
    guard(str(job.candidate_path), refusals.append)

    result.phase = "import"
    try:
        cand = _load_candidate(job.candidate_path)  # type: ignore[arg-type]
        model_new = getattr(cand, "ModelNew", None)
        if not isinstance(model_new, type):
            raise TypeError("the candidate defines no class ModelNew")
    except BaseException as e:
        result.error = _error(e, "import", job)
        result.tampered = integrity.changed() + refusals
        raise _Stop from None

    outputs: list[list[Any]] = []
    timed: tuple[Any, list[Any]] | None = None
    result.phase = phase = "validate"
    p = 0
    try:
        while p < passes.max_configs:
            passes.index = p
            models: dict[int, Any] = {}
            buffers: dict[int, list[Any]] = {}
            for trial in job.trials:
                s = trial.size
                if s not in models:
                    phase = "build"
                    models[s] = build(modules[s], model_new, job.seed, job.device)
                    copy_matching_weights(states[s], models[s])
                    phase = "validate"
                fresh = make_inputs(modules[s], trial.distribution, trial.seed, job.device)
                if trial.buffer == "same" and s in buffers:
                    for b, f in zip(buffers[s], fresh):
                        if isinstance(b, torch.Tensor):
                            trusted.copy_(b, f)
                else:
                    buffers[s] = fresh
                inputs = buffers[s]
                if trial.trace and job.device == "cuda":
                    # JIT compilation and autotuning stay out of the traced call. Other values: the caching allocator
                    # hands the traced call this call's output memory, which must not already hold the answer.
                    warm = [trusted.clone(x) if isinstance(x, torch.Tensor) else x for x in inputs]
                    refill(warm, trial.seed + 7, job.device, trusted.normal_, trusted.generator)
                    with torch.no_grad():
                        models[s](*warm)
                tracker.begin(trial.trace, inputs)
                with torch.no_grad(), (tracker.dispatch_mode() if trial.trace else contextlib.nullcontext()):
                    out = models[s](*inputs)
                _sync(job.device)
                kind, tensors = flatten(out)
                launched, trace = tracker.end(tensors)
                outputs.append([trusted.to(trusted.clone(t.detach()), "cpu") for t in tensors])
                record = _record(trial, job, inputs, kind, tensors)
                record.config_pass, record.launches, record.output_launched, record.trace = p, tracker.launches, launched, trace
                result.trials.append(record)
                if timed is None and s == 0:
                    timed = (models[s], inputs)
            p += 1
    except BaseException as e:
        result.error = _error(e, phase, job)
    finally:
        result.config_passes = max(1, p if result.error is None else p + 1)
        result.config_labels = [passes.labels[i] for i in sorted(passes.labels)]
        result.tampered = integrity.changed() + refusals
        out_file = job.outputs_dir / "outputs.pt"
        torch.save({"outputs": outputs, "timing": []}, out_file)
        result.outputs_file = out_file
    if result.error or result.tampered:
        raise _Stop

    if job.plan is not None and timed is not None:
        result.phase = "timing"
        gpu.take("exclusive", result, job)
        _write(result, job)  # validation outputs are safe even if timing crashes or hangs
        model, inputs = timed
        passes.index = 0
        bench = Bench(lambda: model(*inputs), inputs, job.plan, job.timing, trusted, tracker)
        try:
            with torch.no_grad():
                result.timing = bench.gpu() if job.device == "cuda" else bench.cpu()
        except BaseException as e:
            result.error = _error(e, "timing", job)
            raise _Stop from None
        finally:
            result.tampered = integrity.changed() + refusals
            torch.save({"outputs": outputs, "timing": bench.outputs}, out_file)


def _baseline(job: WorkerJob, result: WorkerResult, gpu: _Gpu) -> None:
    import copy

    import torch

    from agent.harness.timing import Bench
    from agent.harness.trusted import Trusted

    result.phase = "baseline"
    gpu.take("exclusive", result, job)
    result.torch_version = torch.__version__
    trusted = Trusted(job.device)
    modules = _modules(job)
    model = build(modules[0], modules[0].Model, job.seed, job.device)
    _, inputs = _timed_base(job, modules)
    with torch.no_grad():
        if job.device != "cuda":
            result.eager = Bench(lambda: model(*inputs), inputs, None, job.timing, trusted).cpu()
            result.compile_note = "torch.compile is not timed in CPU mode"
            return
        result.gpu = torch.cuda.get_device_name()
        result.eager = Bench(lambda: model(*inputs), inputs, None, job.timing, trusted).gpu()
        try:
            compiled = torch.compile(copy.deepcopy(model))
            result.compiled = Bench(lambda: compiled(*inputs), inputs, None, job.timing, trusted).gpu()
        except Exception as e:  # a compile failure leaves eager as the only baseline
            result.compile_note = f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"


def _profile(job: WorkerJob, gpu: _Gpu) -> int:
    """One warmed-up call inside an NVTX range (JIT compilation stays outside it). Errors: one stderr line."""
    phase = "build"
    try:
        import torch

        gpu.take("exclusive")
        if job.device == "cpu":
            _AutotunePasses().install()
        modules = _modules(job)
        state = weights(modules[0], job.seed, job.device)
        phase = "import"
        cand = _load_candidate(job.candidate_path)  # type: ignore[arg-type]
        phase = "build"
        model = build(modules[0], cand.ModelNew, job.seed, job.device)
        copy_matching_weights(state, model)
        _, inputs = _timed_base(job, modules)
        phase = "run"
        with torch.no_grad():
            for _ in range(max(1, job.profile_warmup)):
                model(*inputs)
            _sync(job.device)
            if job.device == "cuda":
                torch.cuda.nvtx.range_push(job.nvtx_range)
            model(*inputs)
            _sync(job.device)
            if job.device == "cuda":
                torch.cuda.nvtx.range_pop()
        _write(WorkerResult(mode="profile", ok=True, phase="done"), job)
        return 0
    except BaseException as e:
        err = _error(e, phase, job)
        print(f"{err.kind} ({err.phase}): {err.message}".replace("\n", " "), file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m agent.harness.worker JOB.json", file=sys.stderr)
        return 2
    job_path = Path(args[0])
    job = WorkerJob.model_validate_json(job_path.read_text())
    if job.mode == "evaluate":
        job_path.unlink()  # the timing plan says which timed calls are checked: not for the candidate's eyes
    gpu = _Gpu()
    if job.mode == "profile":
        return _profile(job, gpu)
    result = WorkerResult(mode=job.mode)
    handler = {"reference": _reference, "evaluate": _evaluate, "baseline": _baseline}[job.mode]
    try:
        handler(job, result, gpu)
        result.ok, result.phase = True, "done"
    except _Stop:
        pass
    except BaseException as e:  # the problem or the harness itself failed: say so, don't hide it
        result.error = result.error or _error(e, result.phase, job)
    _write(result, job)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter/CUDA teardown: a broken context can hang it, and the result is written
