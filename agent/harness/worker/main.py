"""The process that runs inside the sandbox: `python -m agent.harness.worker.main JOB.json`.

Modes (see job.py):
- reference: the problem's own Model only (candidate code is never imported here): per trial the parent chose, the
  fp64 truth, the fp32 eager error under default flags (its worst over the drawn inputs and ulp-shaken copies),
  digests of the inputs, and for traced trials the PyTorch operators the Model runs; then the truths of the timing
  pool.
- evaluate: the candidate's ModelNew on the same trials (same seeds, same weights), outputs to a tensor file, what
  every call launched and (traced trials) wrote and ran; then, if asked, timing at the first size.
- baseline: eager and torch.compile timing of the problem's Model (no candidate), timed the same way.
- inductor: what torch.compile generates for the problem's Model at each of the job's sizes (agent.harness.worker.capture),
  for agent.inductor.start to translate into an answer; here, so that torch.compile never runs in the agent's process.
- saturation: where the problem's fp64 truth is flat on every drawn input at a size, the smaller draw that moves it
  (agent.harness.worker.saturation): the parent adds that trial, at the GPU's full sizes it cannot run itself.
- profile: one call of the candidate inside an NVTX range, for ncu (exit status and one stderr line).
The worker never judges: the parent compares outputs and applies the rules, so nothing the candidate does here can
fake a pass. Before the candidate is imported the worker deletes its job, keeps its own references to what it times
with, snapshots what the candidate could patch and installs an audit hook (agent.harness.worker.trusted).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from agent.harness.worker import candidate
from agent.harness.worker.inputs import build, digest, flatten, is_float, make_inputs, refill
from agent.harness.job import WorkerJob, WorkerResult
from agent.harness.worker.workerio import (
    GPU_WAIT,
    Gpu,
    Stop,
    describe_error,
    mark,
    problem_modules,
    sync,
    timed_base,
    trial_record,
    write_result,
)

__all__ = ["GPU_WAIT", "main"]


# ---------------------------------------------------------------- modes (the candidate's two: agent.harness.worker.candidate)


def _reference(job: WorkerJob, result: WorkerResult, gpu: Gpu) -> None:
    import copy

    import torch

    from agent.harness.worker.trace import Tracker
    from agent.harness.worker.trusted import Trusted
    from agent.harness.worker.errors import eager_errors, rel_error

    result.phase = "reference"
    gpu.take("shared", result, job)
    trusted = Trusted(job.device)
    tracker = Tracker(trusted)
    modules = problem_modules(job)
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
        sync(job.device)
        if not out32 or len(truth) != len(out32):
            raise TypeError(f"the problem's Model returned {kind}: expected a Tensor or a tuple of Tensors")
        if trial is next(t for t in job.trials if t.size == trial.size):
            _deterministic(truth, truth_of(trial.size, inputs), rel_error)
        record = trial_record(trial, job, inputs, kind, out32)
        record.input_digests, record.trace = digests, trace
        record.eager_errors, record.eager_scales = eager_errors(models[trial.size], inputs, out32, truth, trial.seed)
        record.eager_error = max(record.eager_errors)
        result.trials.append(record)
        truths.append(truth)
    pool: list[list[Any]] = []
    if job.plan is not None:
        _, base = timed_base(job, modules)
        for seed in job.plan.pool_seeds:
            refill(base, seed, job.device, trusted.normal_, trusted.generator)
            pool.append(truth_of(0, base))
    out = job.outputs_dir / "reference.pt"
    torch.save({"truths": truths, "pool": pool}, out)
    result.outputs_file = out
    if job.time_eager:
        from agent.harness.worker.timing import Bench

        first, base = timed_base(job, modules)
        with torch.no_grad():
            result.eager = Bench(lambda: models[0](*base), base, None, job.timing, trusted).cpu()


def _deterministic(first: list[Any], again: list[Any], rel_error: Any) -> None:
    """Two fp64 calls on the same inputs must agree: the tolerance is derived from eager's error against the truth,
    so a random reference (dropout in training mode) would widen it until any answer passed."""
    drift = max((rel_error(a, t) for a, t in zip(again, first)), default=0.0)
    if drift > 1e-9:  # fp64 reordering (atomics) stays near 1e-15
        raise ValueError(f"the problem's Model is not deterministic: two calls on the same inputs differ by {drift:.1e} "
                         "(relative), and no tolerance can judge an answer against it: a random op in its forward "
                         "(torch.rand/randn/randint/bernoulli, or dropout in training mode: nn.Dropout: p=0 or "
                         "self.eval() in the problem file)")


def _baseline(job: WorkerJob, result: WorkerResult, gpu: Gpu) -> None:
    import copy

    import torch

    from agent.harness.settings import tolerance
    from agent.harness.worker.timing import Bench
    from agent.harness.worker.trusted import Trusted
    from agent.harness.worker.inputs import make_inputs
    from agent.harness.worker.errors import errors_vs_fp64

    result.phase = "baseline"
    gpu.take("exclusive", result, job)
    result.torch_version = torch.__version__
    trusted = Trusted(job.device)
    modules = problem_modules(job)
    model = build(modules[0], modules[0].Model, job.seed, job.device)
    _, inputs = timed_base(job, modules)
    with torch.no_grad():
        if job.device != "cuda":
            result.eager = Bench(lambda: model(*inputs), inputs, None, job.timing, trusted).cpu()
            result.compile_note = "torch.compile is not timed in CPU mode"
            return
        result.gpu = torch.cuda.get_device_name()
        trusted.open_energy()
        result.eager = Bench(lambda: model(*inputs), inputs, None, job.timing, trusted).gpu()
        try:
            compiled = torch.compile(copy.deepcopy(model))
            result.compiled = Bench(lambda: compiled(*inputs), inputs, None, job.timing, trusted).gpu()
            # A baseline is only a fair mark if its own answer would pass: Inductor may pick a channels-last
            # convolution that cuDNN runs in TF32 (PyTorch's default) where eager's does not. Judged as a candidate
            # is at the timed size: every trial's distribution, the size's worst eager error setting the tolerance
            # (KernelBench #67: 6.8e-5 on the timed inputs, 3.5e-4 on the offset ones, against 1e-4).
            checks = [inputs] + [make_inputs(modules[0], t.distribution, t.seed, job.device)
                                 for t in job.trials if t.size == 0 and t.distribution != "problem"]
            errors = [errors_vs_fp64(model, [model, compiled], ins) for ins in checks]
            result.compile_error = max(e[1] for e in errors)
            result.compile_tolerance = tolerance(max(e[0] for e in errors))
        except Exception as e:  # a compile failure leaves eager as the only baseline
            result.compile_note = f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            return
        if result.compile_error > result.compile_tolerance:
            _compile_fp32(model, checks, job, result, trusted)


def _compile_fp32(model: Any, checks: list[list[Any]], job: WorkerJob, result: WorkerResult, trusted: Any) -> None:
    """torch.compile at the numerics an fp32 run holds candidates to: where the default one is faster only by being
    outside the tolerance (cuDNN's TF32 convolution is PyTorch's default), this is the fair mark at fp32. Its own
    error is measured as the default one's is: on the timed inputs (`checks[0]`) and the size's other distributions."""
    import copy

    import torch
    import torch._dynamo

    from agent.harness.worker.timing import Bench
    from agent.harness.worker.errors import errors_vs_fp64

    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    saved = (cudnn.allow_tf32, matmul.allow_tf32, torch.get_float32_matmul_precision())
    try:
        cudnn.allow_tf32, matmul.allow_tf32 = False, False
        torch.set_float32_matmul_precision("highest")
        torch._dynamo.reset()  # a graph compiled under the default flags is not reused
        with torch.no_grad():
            compiled = torch.compile(copy.deepcopy(model))
            inputs = checks[0]
            result.compiled_fp32 = Bench(lambda: compiled(*inputs), inputs, None, job.timing, trusted).gpu()
            result.compile_fp32_error = max(errors_vs_fp64(model, [compiled], ins)[0] for ins in checks)
    except Exception as e:  # the default compile's figures stand alone
        result.compile_note = f"torch.compile with TF32 off failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    finally:
        cudnn.allow_tf32, matmul.allow_tf32 = saved[0], saved[1]
        torch.set_float32_matmul_precision(saved[2])


def _inductor(job: WorkerJob, result: WorkerResult, gpu: Gpu) -> None:
    import torch
    import torch._dynamo

    from agent.harness.worker.capture import capture

    result.phase = "inductor"
    if job.device != "cuda":
        raise RuntimeError("Inductor writes Triton kernels only for a GPU")
    gpu.take("exclusive", result, job)  # autotuning times its candidate launches
    result.torch_version, result.gpu = torch.__version__, torch.cuda.get_device_name()
    for module in problem_modules(job):
        torch._dynamo.reset()  # each size compiled afresh, static: no graph reused from the last one
        model = build(module, module.Model, job.seed, job.device)
        inputs = make_inputs(module, "problem", job.seed, job.device)
        result.captures.append(capture(model, inputs, dynamic=False))


_PREWARM_WAIT_S = 600.0


def _saturation(job: WorkerJob, result: WorkerResult, gpu: Gpu) -> None:
    from agent.harness.worker.saturation import scales

    result.phase = "saturation"
    gpu.take("shared", result, job)
    modules = problem_modules(job)
    drawn = [[t.distribution for t in job.trials if t.size == i] for i in range(len(modules))]
    result.varied = scales(lambda i: modules[i], drawn, job.device)
    sync(job.device)


def _prewarm(job_path: Path) -> None:
    """Import what every mode needs (trusted code only, no CUDA context), then wait for the job to be published."""
    import time

    import torch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    from agent.harness.worker import inputs, timing, trace, trusted  # noqa: F401

    give_up = time.monotonic() + _PREWARM_WAIT_S  # a parent that died before publishing must not leave it waiting
    while not job_path.exists():
        if time.monotonic() > give_up:
            os._exit(0)
        time.sleep(0.002)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m agent.harness.worker.main JOB.json", file=sys.stderr)
        return 2
    job_path = Path(args[0])
    if not job_path.exists():  # started early (agent.harness.prewarm): import while the parent checks the answer
        _prewarm(job_path)
    job = WorkerJob.model_validate_json(job_path.read_text())
    if job.mode == "evaluate":
        job_path.unlink()  # the timing plan says which timed calls are checked: not for the candidate's eyes
    gpu = Gpu(job.gpu_lock)
    if job.mode == "profile":
        return candidate.profile(job, gpu)
    result = WorkerResult(mode=job.mode)
    mark(result, "main", job)
    handler = {"reference": _reference, "evaluate": candidate.evaluate, "baseline": _baseline,
               "inductor": _inductor, "saturation": _saturation}[job.mode]
    try:
        handler(job, result, gpu)
        result.ok, result.phase = True, "done"
    except Stop:
        pass
    except BaseException as e:  # the problem or the harness itself failed: say so, don't hide it
        result.error = result.error or describe_error(e, result.phase, job)
    write_result(result, job)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter/CUDA teardown: a broken context can hang it, and the result is written
