"""What every mode of the sandboxed worker (agent.harness.worker.main) shares: the GPU's lock, writing the result,
describing an exception, the problem's modules at each size, a trial's record, the timed calls' inputs."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from agent.harness.worker.inputs import digest, make_inputs
from agent.harness.job import BUFFER_WORDS, TrialRecord, TrialSpec, WorkerError, WorkerJob, WorkerResult

# What a candidate may print in all (its stdout and stderr together, Python's streams): a forward that prints on every
# call, or logs a warning, honest if untidy, would otherwise fill the sandbox's output limit over the thousands of
# calls the GPU's clocks and energy loop make, and be killed for it; nobody reads past this
CANDIDATE_OUTPUT_CHARS = 64 * 1024


class _Capped(io.TextIOBase):
    """A stream passing on the first `budget[0]` characters written to it or its sibling, then one note; the rest
    is dropped."""

    def __init__(self, stream: Any, budget: list[int]) -> None:
        self.stream, self.budget = stream, budget

    def write(self, text: str) -> int:
        if self.budget[0] > 0:
            self.stream.write(text[: self.budget[0]])
            self.budget[0] -= len(text)
            if self.budget[0] <= 0:
                self.stream.write(f"\n[the candidate's output past {CANDIDATE_OUTPUT_CHARS} characters is dropped]\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def writable(self) -> bool:
        return True

    # what libraries ask of sys.stdout/stderr beside writing (faulthandler, subprocess users, encoders): the stream's
    def fileno(self) -> int:
        return int(self.stream.fileno())

    def isatty(self) -> bool:
        return bool(self.stream.isatty())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.stream, "encoding", None) or "utf-8")


@contextlib.contextmanager
def capped_output() -> Iterator[None]:
    """Python's stdout and stderr capped for the candidate's run (CANDIDATE_OUTPUT_CHARS), restored after it."""
    saved, budget = (sys.stdout, sys.stderr), [CANDIDATE_OUTPUT_CHARS]
    sys.stdout, sys.stderr = _Capped(saved[0], budget), _Capped(saved[1], budget)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


class Stop(Exception):
    """Raised after an error has been recorded: stop the mode, write the result."""


class Gpu:
    """This GPU's lock (agent.harness.wall.gpulock) when the job names one: shared for GPU work, exclusive for timing and
    profiling; it dies with the process. Without one (one evaluation at a time) it does nothing."""

    WAIT = "waiting for the GPU"  # the phase while blocked: a timeout there is not the candidate's

    def __init__(self, path: Path | None) -> None:
        from agent.harness.wall.gpulock import GpuLock

        self.lock = GpuLock(path) if path is not None else None

    def take(self, how: str, result: WorkerResult | None = None, job: WorkerJob | None = None) -> None:
        if self.lock is None:
            return
        phase = result.phase if result is not None else ""
        if result is not None and job is not None:
            result.phase = self.WAIT
            write_result(result, job)
        import time

        t0 = time.monotonic()
        self.lock.exclusive() if how == "exclusive" else self.lock.shared()
        if result is not None and job is not None:
            result.waits[how] = round(result.waits.get(how, 0.0) + time.monotonic() - t0, 4)
            result.phase = phase
            write_result(result, job)  # a later kill must not read as a kill while waiting


GPU_WAIT = Gpu.WAIT


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def describe_error(exc: BaseException, phase: str, job: WorkerJob) -> WorkerError:
    """Classify and describe an exception, pointing at the candidate's innermost line involved."""
    chain: list[BaseException] = []
    e: BaseException | None = exc
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
    try:  # the exception is the candidate's object: reading its attributes runs its code
        msg = _compile_error_text(root, chain)
    except Exception:
        msg = None
    if msg is None:
        text = str(root).strip().splitlines()
        msg = f"{type(root).__name__}: " + " | ".join([t.strip() for t in text if t.strip()][:4])
    if len(msg) > 600:
        msg = msg[:600] + " ..."
    if line is not None:
        msg += f" (candidate line {line}: `{src}`)"
    return WorkerError(kind="compile_error" if compile_like else "runtime_error", phase=phase, message=msg, line=line)


def _compile_error_text(root: BaseException, chain: list[BaseException]) -> str | None:
    """Triton's CompilationError as the kernel's line and the reason: its text is a source excerpt of up to 12 lines
    with the reason last, and a message cut after a few lines would show the excerpt and lose the reason."""
    node, src = getattr(root, "node", None), getattr(root, "src", None)
    if type(root).__name__ != "CompilationError" or node is None:
        return None
    reason = getattr(root, "error_message", None)
    if not reason:  # the exception it was raised from carries it
        cause = next((x for x in chain[1:] if str(x).strip()), None)
        reason = f"{type(cause).__name__}: {cause}" if cause is not None else "no reason given"
    reason = " | ".join(t.strip() for t in str(reason).strip().splitlines() if t.strip())
    where = ""
    lineno = getattr(node, "lineno", None)
    if lineno is not None:
        lines = (src or "").splitlines()
        code = lines[lineno - 1].strip() if src and 0 < lineno <= len(lines) else ""
        where = f" at kernel line {lineno}:{getattr(node, 'col_offset', 0)}" + (f" `{code}`" if code else "")
    return f"CompilationError{where}: {reason}"


def mark(result: WorkerResult, name: str, job: WorkerJob) -> None:
    """The end of a phase (the parent turns marks into seconds per phase: agent.harness.pipeline.phases), written at
    once: a worker killed later still says how far it got."""
    import time

    result.marks[name] = time.monotonic()
    write_result(result, job)


def write_result(result: WorkerResult, job: WorkerJob) -> None:
    tmp = job.result_path.with_suffix(".tmp")
    tmp.write_text(result.model_dump_json())
    os.replace(tmp, job.result_path)


def problem_modules(job: WorkerJob) -> list[ModuleType]:
    from agent.problems import load_module

    return [load_module(job.problem_path, s.overrides) for s in job.sizes]


def trial_record(trial: TrialSpec, job: WorkerJob, inputs: list[Any], kind: str, outs: list[Any]) -> TrialRecord:
    import torch

    return TrialRecord(
        id=trial.id, size=job.sizes[trial.size].label, distribution=trial.distribution, buffer=BUFFER_WORDS[trial.buffer],
        input_shapes=[list(x.shape) for x in inputs if isinstance(x, torch.Tensor)], input_digests=[digest(x) for x in inputs],
        output_kind=kind, output_shapes=[list(o.shape) for o in outs],
        output_dtypes=[str(o.dtype).removeprefix("torch.") for o in outs],
    )


def timed_base(job: WorkerJob, modules: list[ModuleType]) -> tuple[TrialSpec, list[Any]]:
    """The inputs the timed calls start from: the first trial at the first size (non-float inputs stay as they are)."""
    first = next(t for t in job.trials if t.size == 0)
    return first, make_inputs(modules[0], first.distribution, first.seed, job.device)
