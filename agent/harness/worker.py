"""The process that runs inside the sandbox: `python -m agent.harness.worker JOB.json`.

Modes (see job.py):
- reference: the problem's own Model only (candidate code is never imported here): per trial, the fp64 truth,
  the fp32 eager error under default flags, and digests of the generated inputs.
- evaluate: the candidate's ModelNew on the same trials (same seeds, same weights); outputs go to a tensor
  file for the parent to compare; then, if asked, timing at the first size.
- baseline: eager and torch.compile timing of the problem's Model (no candidate).
- profile: one call of the candidate inside an NVTX range, for ncu (exit status and one stderr line).
The worker never judges correctness: the parent compares, so nothing the candidate does here can fake a pass.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from agent.harness.job import TrialRecord, WorkerError, WorkerJob, WorkerResult
from agent.harness.launches import Launches

BUFFER_KINDS = ("fresh", "same buffer, new values", "new buffer, same shape")


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


# ---------------------------------------------------------------- shared helpers


def trial_seed(seed: int, size_index: int, dist_index: int) -> int:
    """Seed of one trial's inputs (differs per size and distribution; the weights use `seed` itself)."""
    return (seed * 7919 + 1009 * (size_index + 1) + 31 * dist_index) % (2**31)


def make_inputs(module: ModuleType, distribution: str, seed: int, device: str) -> list[Any]:
    """The problem's get_inputs() (seeded), with floating tensors redrawn for the other distributions."""
    import torch

    torch.manual_seed(seed)
    base = list(module.get_inputs())
    if distribution != "problem":
        gen = torch.Generator().manual_seed(seed + 1)
        for i, t in enumerate(base):
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                r = torch.randn(t.shape, generator=gen, dtype=t.dtype)
                if distribution == "offset":
                    r = r * 2.0 + 5.0
                elif distribution != "randn":
                    raise ValueError(f"unknown input distribution {distribution!r}")
                base[i] = r
    return [t.to(device) if isinstance(t, torch.Tensor) else t for t in base]


def build(module: ModuleType, cls: type, seed: int, device: str) -> Any:
    """cls(*get_init_inputs()) with the weights drawn from `seed` (the same for Model and ModelNew)."""
    import torch

    torch.manual_seed(seed)
    init = module.get_init_inputs()
    torch.manual_seed(seed)
    return cls(*init).to(device)


def copy_matching_weights(src: Any, dst: Any) -> None:
    """Copy src's state_dict into dst where keys and shapes match: same weights whatever ModelNew's init does."""
    theirs = dst.state_dict()
    same = {k: v for k, v in src.state_dict().items() if k in theirs and theirs[k].shape == v.shape}
    if same:
        dst.load_state_dict(same, strict=False)


def digest(x: Any) -> str:
    import torch

    if isinstance(x, torch.Tensor):
        t = x.detach().to("cpu").contiguous()
        h = hashlib.blake2b(f"{t.dtype}{tuple(t.shape)}".encode(), digest_size=16)
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        return h.hexdigest()
    return repr(x)


def flatten(out: Any) -> tuple[str, list[Any]]:
    """(kind, tensors): a Tensor or a tuple/list of Tensors; anything else is reported by its type."""
    import torch

    if isinstance(out, torch.Tensor):
        return "tensor", [out]
    if isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
        return f"{type(out).__name__}[{len(out)}]", list(out)
    return f"not a tensor: {type(out).__name__}", []


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


GPU_WAIT = "waiting for the GPU"  # the phase while blocked on the lock: a timeout there is not the candidate's


def _gpu(mode: str, result: WorkerResult | None = None, job: WorkerJob | None = None) -> None:
    """Take this GPU's lock (agent.harness.gpulock) when AGENT_GPU_LOCK names one: shared for GPU work, exclusive
    for timing and profiling; the lock dies with the process. Unset (one evaluation at a time): nothing to do.
    With a result, the wait is recorded as its phase, so that a kill while waiting says so."""
    global _LOCK
    if _LOCK is None:
        from agent.harness.gpulock import GpuLock

        _LOCK = GpuLock.from_env() or False
    if not _LOCK:
        return
    phase = result.phase if result is not None else ""
    if result is not None and job is not None:
        result.phase = GPU_WAIT
        _write(result, job)
    _LOCK.exclusive() if mode == "exclusive" else _LOCK.shared()
    if result is not None and job is not None:
        result.phase = phase
        _write(result, job)  # a later kill must not read as a kill while waiting


_LOCK: Any = None


def _modules(job: WorkerJob) -> list[ModuleType]:
    from agent.problems import load_module

    return [load_module(job.problem_path, s.overrides) for s in job.sizes]


# ---------------------------------------------------------------- modes


def _reference(job: WorkerJob, result: WorkerResult) -> None:
    import torch

    from agent.harness.validate import rel_error

    result.phase = "reference"
    _gpu("shared", result, job)
    truths: list[list[Any]] = []
    first_inputs = None
    first_model = None
    for s, (size, module) in enumerate(zip(job.sizes, _modules(job))):
        model = build(module, module.Model, job.seed, job.device)
        model64 = copy.deepcopy(model).double()
        for d, dist in enumerate(job.distributions):
            inputs = make_inputs(module, dist, trial_seed(job.seed, s, d), job.device)
            digests = [digest(x) for x in inputs]
            with torch.no_grad():
                kind, out32 = flatten(model(*inputs))
                _, truth = flatten(model64(*[x.double() if _is_float(x) else x for x in inputs]))
            _sync(job.device)
            if not out32 or len(truth) != len(out32):
                raise TypeError(f"the problem's Model returned {kind}: expected a Tensor or a tuple of Tensors")
            eager = max(rel_error(o, t) for o, t in zip(out32, truth))
            truths.append([t.detach().to("cpu", torch.float64) for t in truth])
            result.trials.append(TrialRecord(
                size=size.label, distribution=dist, buffer=buffer_kind(d),
                input_shapes=[list(x.shape) for x in inputs if isinstance(x, torch.Tensor)], input_digests=digests,
                output_kind=kind, output_shapes=[list(o.shape) for o in out32],
                output_dtypes=[str(o.dtype).removeprefix("torch.") for o in out32], eager_error=eager,
            ))
            if first_inputs is None:
                first_inputs, first_model = inputs, model
    out = job.outputs_dir / "reference.pt"
    torch.save({"truths": truths}, out)
    result.outputs_file = out
    if job.time_eager and first_model is not None:
        from agent.harness.timing import bench_cpu

        with torch.no_grad():
            result.eager = bench_cpu(lambda: first_model(*first_inputs), job.timing)


def buffer_kind(d: int) -> str:
    """Trial d at a size: 0 fresh buffers, odd: new values copied into the same buffers, even: new buffers."""
    return BUFFER_KINDS[0] if d == 0 else BUFFER_KINDS[1] if d % 2 == 1 else BUFFER_KINDS[2]


def _evaluate(job: WorkerJob, result: WorkerResult) -> None:
    import torch

    passes = _AutotunePasses()
    if job.device == "cpu":
        passes.install()
    result.phase = "build"
    _gpu("shared", result, job)  # everything before (interpreter, torch, triton imports) overlaps other candidates' timing
    modules = _modules(job)
    # The problem's Models are built before any candidate code runs.
    refs = [build(m, m.Model, job.seed, job.device) for m in modules]

    result.phase = "import"
    try:
        cand = _load_candidate(job.candidate_path)  # type: ignore[arg-type]
        model_new = getattr(cand, "ModelNew", None)
        if not isinstance(model_new, type):
            raise TypeError("the candidate defines no class ModelNew")
    except BaseException as e:
        result.error = _error(e, "import", job)
        raise _Stop from None
    launches = Launches(cand)

    outputs: list[list[Any]] = []
    timed: tuple[Any, list[Any]] | None = None
    result.phase = phase = "validate"
    p = 0
    try:
        while p < passes.max_configs:
            passes.index = p
            for s, (size, module, ref) in enumerate(zip(job.sizes, modules, refs)):
                phase = "build"
                model = build(module, model_new, job.seed, job.device)
                copy_matching_weights(ref, model)
                phase = "validate"
                inputs: list[Any] | None = None
                for d, dist in enumerate(job.distributions):
                    fresh = make_inputs(module, dist, trial_seed(job.seed, s, d), job.device)
                    kind = buffer_kind(d)
                    if inputs is not None and kind == BUFFER_KINDS[1]:
                        for b, f in zip(inputs, fresh):
                            if isinstance(b, torch.Tensor):
                                b.copy_(f)
                    else:
                        inputs = fresh
                    with torch.no_grad():
                        out = model(*inputs)
                    _sync(job.device)
                    okind, tensors = flatten(out)
                    outputs.append([t.detach().to("cpu").clone() for t in tensors])
                    result.trials.append(TrialRecord(
                        size=size.label, distribution=dist, buffer=kind,
                        input_shapes=[list(x.shape) for x in inputs if isinstance(x, torch.Tensor)],
                        input_digests=[digest(x) for x in inputs], output_kind=okind,
                        output_shapes=[list(t.shape) for t in tensors],
                        output_dtypes=[str(t.dtype).removeprefix("torch.") for t in tensors], config_pass=p,
                    ))
                    if s == 0 and d == 0 and p == 0:
                        timed = (model, inputs)
            p += 1
    except BaseException as e:
        result.error = _error(e, phase, job)
    finally:
        result.kernels_tracked, result.kernels_launched = launches.tracked, sorted(launches.launched)
        result.config_passes = max(1, p if result.error is None else p + 1)
        result.config_labels = [passes.labels[i] for i in sorted(passes.labels)]
        out_file = job.outputs_dir / "outputs.pt"
        torch.save({"outputs": outputs}, out_file)
        result.outputs_file = out_file
    if result.error:
        raise _Stop

    if job.time_it and timed is not None:
        result.phase = "timing"
        _gpu("exclusive", result, job)
        _write(result, job)  # validation outputs are safe even if timing crashes or hangs
        model, inputs = timed
        try:
            from agent.harness.timing import bench_cpu, bench_gpu

            with torch.no_grad():
                if job.device == "cuda":
                    result.timing = bench_gpu(lambda: model(*inputs), job.timing)
                else:
                    passes.index = 0
                    result.timing = bench_cpu(lambda: model(*inputs), job.timing)
        except BaseException as e:
            result.error = _error(e, "timing", job)
            raise _Stop from None


def _baseline(job: WorkerJob, result: WorkerResult) -> None:
    import torch

    from agent.harness.timing import bench_cpu, bench_gpu

    result.phase = "baseline"
    _gpu("exclusive", result, job)
    result.torch_version = torch.__version__
    module = _modules(job)[0]
    model = build(module, module.Model, job.seed, job.device)
    inputs = make_inputs(module, "problem", trial_seed(job.seed, 0, 0), job.device)
    with torch.no_grad():
        if job.device != "cuda":
            result.eager = bench_cpu(lambda: model(*inputs), job.timing)
            result.compile_note = "torch.compile is not timed in CPU mode"
            return
        result.gpu = torch.cuda.get_device_name()
        result.eager = bench_gpu(lambda: model(*inputs), job.timing)
        try:
            compiled = torch.compile(copy.deepcopy(model))
            result.compiled = bench_gpu(lambda: compiled(*inputs), job.timing)
        except Exception as e:  # a compile failure leaves eager as the only baseline
            result.compile_note = f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"


def _profile(job: WorkerJob) -> int:
    """One warmed-up call inside an NVTX range (JIT compilation stays outside it). Errors: one stderr line."""
    phase = "build"
    try:
        import torch

        _gpu("exclusive")
        if job.device == "cpu":
            _AutotunePasses().install()
        module = _modules(job)[0]
        ref = build(module, module.Model, job.seed, job.device)
        phase = "import"
        cand = _load_candidate(job.candidate_path)  # type: ignore[arg-type]
        phase = "build"
        model = build(module, cand.ModelNew, job.seed, job.device)
        copy_matching_weights(ref, model)
        inputs = make_inputs(module, "problem", trial_seed(job.seed, 0, 0), job.device)
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


def _is_float(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor) and x.is_floating_point()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m agent.harness.worker JOB.json", file=sys.stderr)
        return 2
    job = WorkerJob.model_validate_json(Path(args[0]).read_text())
    if job.mode == "profile":
        return _profile(job)
    result = WorkerResult(mode=job.mode)
    handler = {"reference": _reference, "evaluate": _evaluate, "baseline": _baseline}[job.mode]
    try:
        handler(job, result)
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
