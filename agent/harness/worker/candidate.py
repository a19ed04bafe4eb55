"""The candidate's side of the worker: `evaluate` (every trial the parent chose, then timing) and `profile` (one call
inside an NVTX range, for ncu). The only modules of the worker that import candidate code."""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from agent.harness.worker.inputs import (
    NotPlain,
    build,
    copy_matching_weights,
    flatten,
    make_inputs,
    module_weights,
    own_attributes,
    refill,
    weights,
)
from agent.harness.job import TrialRecord, TrialSpec, WorkerJob, WorkerResult
from agent.harness.worker.kernelsource import Sources
from agent.harness.worker.trusted import numeric_flags, restore_speed_flags, speed_flags
from agent.harness.worker.workerio import (
    Gpu,
    Stop,
    capped_output,
    describe_error,
    mark,
    problem_modules,
    sync,
    timed_base,
    trial_record,
    write_result,
)


# Python's recursion limit in a candidate's worker: a forward that probes how much room its stack has left (an
# operator at the edge fails only where the recorder's frames take the last of it) must recurse this deep on every
# call to do so (~15 ms here, 10x gap44's eager call on an H100), more than any answer gains; honest forwards run a
# few dozen deep. Not higher: a runaway recursion through C (a __getattr__ calling itself) must still end in a
# RecursionError, not overflow the 8 MB C stack (it does at 20,000 on Python 3.11)
STACK_ROOM = 10_000


class AutotunePasses:
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


def model_new_of(module: ModuleType) -> Any:
    """The class the module's own code bound to ModelNew, read from its namespace: getattr on a module calls a
    module-level __getattr__ (PEP 562) where the name is missing, which would run candidate code for the harness."""
    return vars(module).get("ModelNew")


def load_candidate(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("candidate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    return module


def evaluate(job: WorkerJob, result: WorkerResult, gpu: Gpu) -> None:
    """Import the candidate, run every trial (every autotune config in CPU mode), then time it if the job asks; what
    it prints is capped (workerio.capped_output)."""
    with capped_output():
        _evaluate(job, result, gpu)


def _evaluate(job: WorkerJob, result: WorkerResult, gpu: Gpu) -> None:
    session = _Session(job, result)
    result.phase = "build"
    gpu.take("shared", result, job)  # everything before (interpreter, torch, triton imports) overlaps others' timing
    session.prepare()
    # each mark is written with the phase that follows it: a worker killed next is reported in the right phase
    result.phase = "import"
    mark(result, "ready", job)
    model_new = session.import_model_new()
    result.phase = "validate"
    mark(result, "imported", job)
    timed = session.validate(model_new)
    if job.plan is not None and timed is not None:
        result.phase = "timing"
        mark(result, "validated", job)  # validation outputs are safe even if timing crashes or hangs
        gpu.take("exclusive", result, job)
        session.time(*timed)
        mark(result, "timed", job)
    else:
        mark(result, "validated", job)


class _Session:
    """One evaluation's trusted state: references taken, and snapshots made, before any candidate code runs."""

    def __init__(self, job: WorkerJob, result: WorkerResult) -> None:
        from agent.harness.worker.trace import Tracker
        from agent.harness.worker.trusted import Trusted

        self.job, self.result = job, result
        self.passes = AutotunePasses()
        if job.device == "cpu":
            from agent.harness.worker import interpret

            self.passes.install()
            interpret.install()
        self.trusted = Trusted(job.device)
        self.tracker = Tracker(self.trusted)
        self.tracker.candidate = str(job.candidate_path)
        self.tracker.install()
        self.sources = Sources()
        self.sources.install()
        sys.setrecursionlimit(STACK_ROOM)  # see trace.near_the_recursion_limit
        self.outputs: list[list[Any]] = []
        self.ablated: list[list[Any]] = []  # the ablated call's outputs (at most one call)
        self.out_file = job.outputs_dir / "outputs.pt"
        self.refusals: list[str] = []

    def prepare(self) -> None:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITCallable, JITFunction

        from agent.harness.worker.trusted import Integrity, guard

        job = self.job
        self.modules = problem_modules(job)
        # the problem's Models are gone before any candidate code runs: only their weights stay
        self.states = [weights(m, job.seed, job.device) for m in self.modules]
        gc.collect()
        watched: dict = {"JITFunction": JITFunction, "JITCallable": JITCallable, "Autotuner": Autotuner,
                         **self.tracker.hooked()}
        if job.plan is not None and job.plan.energy:
            self.trusted.open_energy()  # before the candidate exists, like every reference the timing loop holds
            if "pynvml" in sys.modules:
                watched["pynvml"] = sys.modules["pynvml"]
        self.integrity = Integrity(watched)
        self.tracker.flags = numeric_flags()  # before the candidate's import: the defaults, as the baseline runs
        guard(str(job.candidate_path), self.refusals.append)

    def tampered(self) -> list[str]:
        return self.integrity.changed() + self.refusals + self.sources.swapped

    def import_model_new(self) -> type:
        self.result.phase = "import"
        try:
            cand = load_candidate(self.job.candidate_path)  # type: ignore[arg-type]
            restore_speed_flags(self.integrity.flags)
            model_new = model_new_of(cand)
            if not isinstance(model_new, type):
                raise TypeError("the candidate defines no class ModelNew")
            return model_new
        except BaseException as e:
            self.result.error = describe_error(e, "import", self.job)
            self.result.tampered = self.tampered()
            raise Stop from None

    def validate(self, model_new: type) -> tuple[Any, list[Any]] | None:
        """Every trial, once per config pass; the outputs go to the parent, which judges them. Returns the model and
        inputs the timed calls start from (the first trial at the first size)."""
        import torch

        result, job = self.result, self.job
        result.phase = "validate"
        self.phase = "validate"
        timed: tuple[Any, list[Any]] | None = None
        p = 0
        try:
            while p < self.passes.max_configs:
                self.passes.index = p
                models: dict[int, Any] = {}
                buffers: dict[int, list[Any]] = {}
                for trial in job.trials:
                    with self.trusted.collector_off():  # the candidate's finalizers run between calls only
                        self._trial(trial, p, model_new, models, buffers)
                        self.trusted.collect()
                    if p == 0 and trial.id == job.ablate:
                        with self.trusted.collector_off():
                            self._ablated(trial, models[trial.size])
                            self.trusted.collect()
                    if "first" not in result.marks:  # the first call compiles the kernels (and autotunes)
                        mark(result, "first", job)
                    if timed is None and trial.size == 0:
                        timed = (models[0], buffers[0])
                if p == 0 and self.passes.max_configs > 1:
                    result.planned_passes = self.passes.max_configs
                    mark(result, "configs", job)  # the parent's limit grows by a pass's allowance per further pass
                p += 1
        except BaseException as e:
            result.error = describe_error(e, self.phase, job)
        finally:
            result.config_passes = max(1, p if result.error is None else p + 1)
            result.config_labels = [self.passes.labels[i] for i in sorted(self.passes.labels)]
            result.tampered = self.tampered()
            torch.save({"outputs": self.outputs, "timing": [], "ablated": self.ablated}, self.out_file)
            result.outputs_file = self.out_file
        if result.error or result.tampered:
            raise Stop
        return timed

    def _trial(self, trial: TrialSpec, p: int, model_new: type, models: dict[int, Any],
               buffers: dict[int, list[Any]]) -> None:
        import torch

        job, trusted, tracker, s = self.job, self.trusted, self.tracker, trial.size
        if s not in models:
            self.phase = "build"
            models[s] = build(self.modules[s], model_new, job.seed, job.device)
            restore_speed_flags(self.integrity.flags)
            copy_matching_weights(self.states[s], models[s])
            self.phase = "validate"
        fresh = make_inputs(self.modules[s], trial.distribution, trial.seed, job.device)
        if trial.buffer == "same" and s in buffers:
            for b, f in zip(buffers[s], fresh):
                if isinstance(b, torch.Tensor):
                    trusted.copy_(b, f)
        else:
            buffers[s] = fresh
        inputs = buffers[s]
        warmed = None
        if trial.trace and job.device == "cuda":
            # JIT compilation and autotuning stay out of the traced call. Other values: the caching allocator
            # hands the traced call this call's output memory, which must not already hold the answer.
            warm = [trusted.clone(x) if isinstance(x, torch.Tensor) else x for x in inputs]
            refill(warm, trial.seed + 7, job.device, trusted.normal_, trusted.generator)
            with torch.no_grad():
                warmed = models[s](*warm)  # kept until the trial is over: its finalizers never run before the call
        tracker.weights = module_weights(models[s], torch)  # the weights a traced call may fold after a launch
        tracker.begin(trial.trace, inputs)
        with torch.no_grad(), (tracker.dispatch_mode() if trial.trace else contextlib.nullcontext()):
            out = models[s](*inputs)
        sync(job.device)
        self._plain(inputs, out)
        kind, tensors = flatten(out)
        launched, trace = tracker.end(tensors)
        self.outputs.append([trusted.to(trusted.clone(t.detach()), "cpu") for t in tensors])
        record = trial_record(trial, job, inputs, kind, tensors)
        record.config_pass, record.launches, record.output_launched, record.trace = p, tracker.launches, launched, trace
        self.result.trials.append(record)
        del out, warmed  # here, with the call's outputs copied: a finalizer tied to them runs now, not in a call

    def _ablated(self, trial: TrialSpec, model: Any) -> None:
        """One more call on the trial's inputs drawn again, every launch's writes destroyed as it returns
        (agent.harness.worker.ablation); its outputs go to the parent, which judges whether they are still right. What it
        raises is reported, not an error of the candidate: destroyed writes may break a forward that used them."""
        import torch

        from agent.harness.job import Ablated

        job, trusted, tracker = self.job, self.trusted, self.tracker
        inputs = make_inputs(self.modules[trial.size], trial.distribution, trial.seed, job.device)
        tracker.weights = module_weights(model, torch)
        tracker.begin(True, inputs, ablate=True)
        record = Ablated(trial=trial.id)
        tensors: list[Any] = []
        try:
            with torch.no_grad(), tracker.dispatch_mode():
                out = model(*inputs)
            sync(job.device)
            self._plain(inputs, out)
            _, tensors = flatten(out)
        except NotPlain:
            raise
        except Exception as e:  # the candidate's own exception, with what was destroyed
            record.error = f"{type(e).__name__}: {e}"[:300]
            out = None
        tracker.end(tensors)
        record.launches = tracker.launches
        self.ablated.append([trusted.to(trusted.clone(t.detach()), "cpu") for t in tensors])
        tracker.restore()
        self.result.ablated = record
        del out

    def _plain(self, inputs: list[Any], out: Any) -> None:
        """Before the harness reads anything of a call: the tensors it returned and was handed hold no attributes of
        their own (own_attributes); one that does is tampering, and the worker stops before reading it."""
        try:
            own_attributes("output", list(out) if type(out) in (tuple, list) else [out])
            own_attributes("input", inputs)
        except NotPlain as e:
            self.refusals.append(str(e))
            raise

    def time(self, model: Any, inputs: list[Any]) -> None:
        import torch

        from agent.harness.worker.timing import Bench

        self.passes.index = 0
        self.tracker.weights = module_weights(model, torch)
        bench = Bench(lambda: model(*inputs), inputs, self.job.plan, self.job.timing, self.trusted, self.tracker)
        try:
            with torch.no_grad():
                self.result.timing = bench.gpu() if self.job.device == "cuda" else bench.cpu()
        except NotPlain as e:  # tampering: the verdict says so, not a runtime error
            self.refusals.append(str(e))
            raise Stop from None
        except BaseException as e:
            self.result.error = describe_error(e, "timing", self.job)
            raise Stop from None
        finally:
            self.result.tampered = self.tampered()
            self.result.timed_trials = [
                TrialRecord(id=-1 - k, size=self.job.sizes[0].label, distribution="timed (N(0, 1))",
                            buffer=f"timed call, checked {k + 1} of {len(bench.traces)}",
                            output_shapes=shapes, launches=launches, output_launched=launched, trace=trace)
                for k, (launches, launched, trace, shapes) in enumerate(bench.traces)]
            torch.save({"outputs": self.outputs, "timing": bench.outputs, "ablated": self.ablated}, self.out_file)


def profile(job: WorkerJob, gpu: Gpu) -> int:
    """One warmed-up call inside an NVTX range (JIT compilation stays outside it). Errors: one stderr line.

    The GPU's lock is shared while the candidate is imported, built and first called (its JIT compilation: other
    candidates may build and validate beside it, as theirs do beside each other) and exclusive from the second
    warm-up call on: ncu's replays, and the clocks it locks for them, then have the GPU alone, and several profiles
    overlap everything but their replays."""
    import time

    phase, marks = "build", {"main": time.monotonic()}
    try:
        with capped_output():
            import torch

            gpu.take("shared")
            if job.device == "cpu":
                from agent.harness.worker import interpret

                AutotunePasses().install()
                interpret.install()
            Sources().install()  # the profile is of the code that was checked
            modules = problem_modules(job)
            state = weights(modules[0], job.seed, job.device)
            phase = "import"
            defaults = speed_flags()
            cand = load_candidate(job.candidate_path)  # type: ignore[arg-type]
            restore_speed_flags(defaults)
            phase = "build"
            model = build(modules[0], model_new_of(cand), job.seed, job.device)
            restore_speed_flags(defaults)
            copy_matching_weights(state, model)
            _, inputs = timed_base(job, modules)
            marks["imported"] = time.monotonic()
            phase = "run"
            with torch.no_grad():
                model(*inputs)  # compiles (and autotunes) its kernels
                sync(job.device)
                marks["first"] = time.monotonic()
                gpu.take("exclusive")
                marks["locked"] = time.monotonic()
                for _ in range(max(0, job.profile_warmup - 1)):
                    model(*inputs)
                sync(job.device)
                if job.device == "cuda":
                    torch.cuda.nvtx.range_push(job.nvtx_range)
                model(*inputs)
                sync(job.device)
                if job.device == "cuda":
                    torch.cuda.nvtx.range_pop()
            marks["profiled"] = time.monotonic()
            write_result(WorkerResult(mode="profile", ok=True, phase="done", marks=marks), job)
            return 0
    except BaseException as e:
        err = describe_error(e, phase, job)
        print(f"{err.kind} ({err.phase}): {err.message}".replace("\n", " "), file=sys.stderr)
        return 1
