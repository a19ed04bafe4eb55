"""What the parent tells a worker process (WorkerJob, a JSON file) and what the worker answers (WorkerResult).

The parent decides, the worker reports: the parent chooses every trial (size, input distribution, seed, buffer
reuse) and the timed calls whose outputs it will check, and requires a record for each; the worker never judges.
An evaluate worker reads its job and deletes it before the candidate is imported, so the candidate cannot learn
which timed calls are checked.

Paths in a job are absolute and lie inside the sandbox's workdir, which the sandbox makes visible at the same path.
Tensors (truths, candidate outputs) travel in `.pt` files beside the result JSON. Over 400 lines because the
contract between the two processes stays in one file: each type beside the ones it holds, read by both sides.
"""

from __future__ import annotations

import codecs
import os
import secrets
import shutil
import site
import sys
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field

from agent.harness.settings import TimingSettings, settings
from agent.harness.worker.capture import Capture
from agent.schema import Model, ProblemSpec, SizeSet

Mode = Literal["evaluate", "reference", "baseline", "profile", "inductor", "saturation"]
Device = Literal["cuda", "cpu"]
BufferUse = Literal["fresh", "same", "new"]

CANDIDATE_FILE = "candidate.py"
PROBLEM_FILE = "problem.py"
JOB_FILE = "job.json"
RESULT_FILE = "result.json"
BUFFER_WORDS = {"fresh": "fresh", "same": "same buffer, new values", "new": "new buffer, same shape"}


class TrialSpec(Model):
    """One validation call, as the parent chose it."""

    id: int
    size: int = Field(description="index into the job's sizes")
    distribution: str
    seed: int
    buffer: BufferUse = Field(description="fresh buffers; new values copied into the previous trial's buffers; "
                                          "new buffers of the same shape")
    trace: bool = Field(default=False, description="record this forward's Triton launches and PyTorch operators")


class TimingPlan(Model):
    """How the timed calls get their inputs: new content in the same buffers before every call; at `positions`
    (fractions of the device clock's calls), `latency_positions` (of the latency clock's) and `energy_positions` (of
    the energy loop's) inputs the reference knows (`pool_seeds`, in that order), whose outputs come back to be
    checked. The energy loop's come back only where energy was measured (BenchStats.energy_mj)."""

    pool_seeds: list[int]
    positions: list[float]
    latency_positions: list[float] = Field(default_factory=list)
    energy_positions: list[float] = Field(default_factory=list)
    energy: bool = Field(default=True, description="run the energy loop (a run asks for it where it ranks by energy "
                         "or --energy: it holds the GPU about 4 s)")
    fresh_seed: int

    @property
    def energy_pool(self) -> range:
        """The pool indices of the energy loop's checked calls (the last ones)."""
        return range(len(self.pool_seeds) - len(self.energy_positions), len(self.pool_seeds))


class WorkerJob(Model):
    mode: Mode
    problem_path: Path = Field(description="the problem file (a copy inside the workdir)")
    candidate_path: Path | None = Field(default=None, description="the candidate's code (evaluate, profile)")
    sizes: list[SizeSet] = Field(description="size sets; the first is the timed (and profiled) size")
    device: Device = "cuda"
    seed: int = Field(default=0, description="the weights' seed")
    trials: list[TrialSpec] = Field(default_factory=list)
    plan: TimingPlan | None = Field(default=None, description="evaluate: time after validation; reference: "
                                                              "compute the pool's truths")
    time_eager: bool = Field(default=False, description="reference: also time eager (CPU mode's cheap baseline)")
    timing: TimingSettings = Field(default_factory=lambda: settings().timing)
    result_path: Path
    outputs_dir: Path = Field(description="where the worker writes tensor files")
    profile_warmup: int = 3
    nvtx_range: str = "agent_profile"
    gpu_lock: Path | None = Field(default=None, description="the GPU's lock file, where several workers share the GPU")
    ablate: int | None = Field(default=None, description="evaluate: the trial after which one more call runs on that "
                               "trial's inputs with what each launch wrote destroyed (agent.harness.worker.ablation)")


class WorkerError(Model):
    kind: Literal["compile_error", "runtime_error"]
    phase: str = Field(description="import | build | validate | timing | reference | baseline | inductor | "
                                   "saturation")
    message: str
    line: int | None = Field(default=None, description="innermost line of the candidate file involved")


class Op(Model):
    """One PyTorch operator a forward ran (aggregated by name): what it read, and how much of that derives from the
    forward's inputs (the data; the rest is weights and constants: preparing those is not the forward's work)."""

    name: str
    kind: Literal["free", "heavy", "compute"]
    calls: int = 0
    in_bytes: int = 0
    data_bytes: int = 0
    largest_bytes: int = 0
    out_bytes: int = Field(default=0, description="what it returned, in total (a heavy layer's output)")
    least_yield: float | None = Field(default=None, description="the least bytes returned per byte read by one call "
                                      "(a heavy layer's: a convolution spent on a reduction returns almost nothing)")


class Span(Model):
    """Bytes [lo, hi) of one storage (see Storage)."""

    id: int
    lo: int
    hi: int
    bytes: int = Field(default=0, description="the bytes inside the span a launch wrote, where they were recorded "
                       "one by one (CPU mode); 0: the whole span")

    @property
    def size(self) -> int:
        return self.bytes or self.hi - self.lo


class Traffic(Model):
    """One storage's memory traffic in a call, as the interpreter recorded every load and store (CPU mode)."""

    id: int
    written: int = Field(default=0, description="bytes the call's launches stored outside the returned tensors' "
                         "extents, each byte once however many launches wrote it")
    reloaded: int = Field(default=0, description="bytes the launches loaded from locations a launch of the call had "
                          "stored (the same launch included), every load counted: a round trip through memory")


class Launch(Model):
    """One Triton launch of a traced forward: what it was given (each tensor's extent in its storage), and the bytes
    of each storage whose content it changed (first to last changed byte)."""

    kernel: str
    args: list[Span] = Field(default_factory=list)
    written: list[Span] = Field(default_factory=list)
    foreign: list[str] = Field(default_factory=list, description="type names of arguments that are neither tensors "
                               "nor plain values (agent.harness.worker.trace.foreign_arguments)")


class Storage(Model):
    id: int
    bytes: int
    shape: list[int] = Field(default_factory=list, description="of the first tensor seen on it")


class Read(Model):
    """One PyTorch operator call that read storages the forward had already met (its inputs, or a launch's tensors),
    in the order of the forward: what a buffer a Triton kernel wrote was used for afterwards."""

    op: str
    kind: Literal["free", "heavy", "compute"]
    after: int = Field(description="Triton launches the forward had made before this call")
    storages: list[int] = Field(default_factory=list, description="storage ids whose data it read")


class Trace(Model):
    """What one forward did, as recorded where it happened."""

    launches: list[Launch] = Field(default_factory=list)
    ops: list[Op] = Field(default_factory=list)
    reads: list[Read] = Field(default_factory=list)
    storages: list[Storage] = Field(default_factory=list)
    inputs: list[int] = Field(default_factory=list, description="storage ids of the forward's tensor inputs")
    outputs: list[int] = Field(default_factory=list, description="storage ids of the returned tensors")
    watching: list[str] = Field(default_factory=list, description="what let the forward tell a recorded call from "
                                "the others: operators that let the host see the GPU's progress "
                                "(agent.harness.worker.trace.watches_the_gpu), tensor classes of the candidate's")
    flags: list[str] = Field(default_factory=list, description="numeric flags that differed from the harness's where "
                             "an operator ran (agent.harness.worker.trace.Tracker.flags_where)")
    output_spans: list[Span] = Field(default_factory=list, description="the bytes of their storages the returned "
                                     "tensors cover (a write past them is not the output)")
    measured: bool = Field(default=False, description="every load and store of the launches was recorded (CPU mode)")
    traffic: list[Traffic] = Field(default_factory=list, description="measured: per storage, what the launches wrote "
                                   "outside the output and read back")


class TrialRecord(Model):
    """One validation trial as the worker ran it (tensors live in the outputs file, same order)."""

    # eager's own error may be inf (it overflows where the truth does not): JSON's null for it failed the result's
    # schema ("the reference ... failed: exit status 0"), so infinities and NaN are written as such
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")
    id: int
    size: str
    distribution: str
    buffer: str
    input_shapes: list[list[int]] = Field(default_factory=list)
    input_digests: list[str] = Field(default_factory=list, description="after the call (evaluate) / as generated")
    output_kind: str = "tensor"
    output_shapes: list[list[int]] = Field(default_factory=list)
    output_dtypes: list[str] = Field(default_factory=list)
    eager_error: float | None = Field(default=None, description="reference only: fp32 eager vs fp64 truth")
    eager_errors: list[float] = Field(default_factory=list, description="reference only: the same, per output")
    eager_scales: list[float] = Field(default_factory=list, description="reference only: eager fp32's largest "
                                      "constant factor per output (agent.harness.worker.errors.scale_fit)")
    config_pass: int = 0
    launches: int = Field(default=0, description="Triton launches during this call")
    output_launched: bool = Field(default=False, description="every returned tensor's storage was given to a launch")
    trace: Trace | None = None


class Ablated(Model):
    """The call with every launch's writes destroyed (agent.harness.worker.ablation), as it ended."""

    trial: int = Field(description="the trial whose inputs it ran on")
    launches: int = 0
    error: str | None = Field(default=None, description="what it raised (the destroyed writes broke the forward)")


class BenchStats(Model):
    """One callable on both clocks (agent.harness.worker.timing): `median_ms` is the device clock."""

    median_ms: float
    spread_pct: float
    latency_ms: float | None = Field(default=None, description="one synchronized call from an idle GPU")
    latency_spread_pct: float | None = None
    host_ms: float | None = Field(default=None, description="host time to issue one call (until it returns)")
    repeats: int
    latency_repeats: int = 0
    note: str = ""
    launches_min: int | None = Field(default=None, description="fewest Triton launches in one timed call")
    launches_max: int | None = None
    sampled: list[int] = Field(default_factory=list, description="indices of the timed calls whose outputs came back")
    energy_mj: float | None = Field(default=None, description="GPU energy per call (median over blocks of calls "
                                    "queued back to back), from NVML's counter; None: not measured (energy_note)")
    energy_spread_pct: float | None = None
    energy_blocks: int = 0
    energy_calls: int = Field(default=0, description="calls per block")
    energy_period_ms: float | None = Field(default=None, description="the counter's step, as measured")
    power_w: float | None = Field(default=None, description="mean power over the median block")
    idle_w: float | None = Field(default=None, description="the GPU's idle power, as the counter read it before")
    energy_note: str = Field(default="", description="why energy was not measured")


class WorkerResult(Model):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")  # an error of inf is no "not measured"
    mode: Mode
    ok: bool = False
    phase: str = "start"
    error: WorkerError | None = None
    trials: list[TrialRecord] = Field(default_factory=list)
    outputs_file: Path | None = None
    config_passes: int = Field(default=1, description="CPU mode: autotune configs validated one pass each")
    planned_passes: int = Field(default=1, description="CPU mode: the passes the worker will make (the autotune "
                                "configs found in the first), written as the first ends: the limit grows with them")
    config_labels: list[str] = Field(default_factory=list)
    timing: BenchStats | None = None
    timed_trials: list[TrialRecord] = Field(default_factory=list, description="the checked timed calls, traced (ids: "
                                            "-1 - their order), for the run-time rules")
    eager: BenchStats | None = None
    compiled: BenchStats | None = None
    compile_note: str = ""
    compile_error: float | None = Field(default=None, description="torch.compile's output vs the fp64 truth on the "
                                        "timed inputs (relative, as the candidates' is)")
    compile_tolerance: float | None = Field(default=None, description="the tolerance a candidate gets on those inputs "
                                            "(from eager's own fp32 error there)")
    compiled_fp32: BenchStats | None = Field(default=None, description="torch.compile with TF32 off (fp32 numerics), "
                                             "timed only where the default one's output is outside the tolerance")
    compile_fp32_error: float | None = None
    varied: list[tuple[int, str]] = Field(default_factory=list, description="saturation: (size index, draw) for each "
                                          "size whose truth is flat on every drawn input (agent.harness.worker.saturation)")
    captures: list[Capture] = Field(default_factory=list, description="inductor: what torch.compile generated for "
                                    "the problem's Model at each of the job's sizes")
    gpu: str = ""
    torch_version: str = ""
    tampered: list[str] = Field(default_factory=list, description="what the candidate changed in torch, triton, "
                                                                   "builtins or the harness at run time")
    ablated: Ablated | None = Field(default=None, description="the ablated call (WorkerJob.ablate), its outputs under "
                                   "'ablated' in the outputs file")
    marks: dict[str, float] = Field(default_factory=dict, description="time.monotonic() as each phase ended")
    waits: dict[str, float] = Field(default_factory=dict, description="seconds spent waiting for the GPU's lock, "
                                    "by kind (shared, exclusive)")


def round_seed(seed: int, round_: int) -> int:
    """The seed of a round's trials: fresh inputs every round, one truth shared by the round's candidates."""
    return seed * 100_003 + round_


def trial_seed(seed: int, size_index: int, dist_index: int) -> int:
    """Seed of one trial's inputs (differs per size and distribution; the weights use `seed` itself)."""
    return (seed * 7919 + 1009 * (size_index + 1) + 31 * dist_index) % (2**31)


def plan_trials(sizes: list[SizeSet], seed: int, distributions: list[str], wide: str | None = None) -> list[TrialSpec]:
    """Every size x distribution, in order. Per size: the first call on fresh buffers, the second with new values
    copied into those buffers, the third on new buffers of the same shape, and so on alternating: together they
    catch outputs cached by shape, by buffer address or by anything else. Every call is traced: a candidate counts
    its calls, so one traced call per size would tell it when to do the stage's work honestly.

    `wide` (a "randn*S" draw of large S): one more trial at the first size whose draws are the defaults (a size
    naming its own keeps to them: its inputs may have a domain), on new buffers: values far past N(0, 1), where a
    formula that overflows (tanh as (e^2x - 1)/(e^2x + 1), NaN past x = 44; softplus without its threshold) or a
    softmax without its max subtracted goes wrong while PyTorch's own stays right."""
    trials: list[TrialSpec] = []
    for s, size in enumerate(sizes):
        for d, dist in enumerate(size.distributions or distributions):
            use: BufferUse = "fresh" if d == 0 else "same" if d % 2 == 1 else "new"
            trials.append(TrialSpec(id=len(trials), size=s, distribution=dist, seed=trial_seed(seed, s, d), buffer=use,
                                    trace=True))
    first = next((s for s, size in enumerate(sizes) if not size.distributions), None)
    if wide is not None and first is not None:
        trials.append(TrialSpec(id=len(trials), size=first, distribution=wide,
                                seed=trial_seed(seed, first, len(distributions)), buffer="new", trace=True))
    return trials


def plan_timing(device: Device, seed: int, measure_energy: bool = True) -> TimingPlan:
    """Pool inputs at secret positions (GPU: a handful among many timed calls; CPU: every timed call is checked).
    `measure_energy`: the GPU's energy loop runs (its checked calls are planned); without them the worker skips it."""
    rng = secrets.SystemRandom()
    cfg = settings().timing
    latency: list[float] = []
    energy: list[float] = []
    if device == "cpu":  # one clock: every call is checked
        n = max(1, cfg.cpu_reps)
        positions = [i / max(1, n - 1) for i in range(n)]
    else:  # each clock's calls are checked on their own inputs: a result kept from one loop is wrong in the other
        n = cfg.checked_calls
        positions = sorted(rng.uniform(0.0, 1.0) for _ in range(n))
        latency = sorted(rng.uniform(0.0, 1.0) for _ in range(n))
        energy = sorted(rng.uniform(0.0, 1.0) for _ in range(cfg.energy_checked_calls)) if measure_energy else []
    pool = [(seed * 31 + 977 * (i + 1)) % (2**31) for i in range(len(positions) + len(latency) + len(energy))]
    return TimingPlan(pool_seeds=pool, positions=positions, latency_positions=latency, energy_positions=energy,
                      energy=measure_energy,
                      fresh_seed=rng.randrange(2**31))


def write_job(workdir: Path, job: WorkerJob, publish: bool = True) -> Path:
    """Write the job as workdir/job.json; returns its path. `publish=False` leaves it as job.json.tmp for the caller
    to rename (publish_job) once the rest of the workdir is ready: a worker started early waits for the name."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / JOB_FILE
    tmp = workdir / (JOB_FILE + ".tmp")
    tmp.write_text(job.model_dump_json(indent=2))
    if publish:
        publish_job(path)
    return path


def publish_job(path: Path) -> None:
    """Give the job its name, whole or not at all (agent.harness.prewarm)."""
    os.replace(path.with_name(JOB_FILE + ".tmp"), path)


def worker_argv(job_path: Path) -> list[str]:
    """The command that runs a worker on a job file (wrap it in `ncu ...` to profile)."""
    return [sys.executable, "-m", "agent.harness.worker.main", str(job_path)]


def prepare_job(
    workdir: Path,
    mode: Mode,
    problem: ProblemSpec,
    *,
    code: str | None = None,
    device: Device = "cuda",
    sizes: list[SizeSet] | None = None,
    seed: int = 0,
    trials: list[TrialSpec] | None = None,
    plan: TimingPlan | None = None,
    time_eager: bool = False,
    gpu_lock: Path | None = None,
    publish: bool = True,
    ablate: int | None = None,
) -> Path:
    """Lay out a workdir (problem copy, candidate file, outputs dir) and write its job; returns the job path.

    `sizes` defaults to the problem's sizes for the device (GPU: `sizes`, CPU: `cpu_sizes`); `trials` to one per
    size and distribution (plan_trials)."""
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    problem_copy = workdir / PROBLEM_FILE
    shutil.copyfile(problem.path, problem_copy)
    candidate = write_candidate(workdir, code) if code is not None else None
    outputs = workdir / "outputs"
    outputs.mkdir(exist_ok=True)
    sizes = sizes if sizes is not None else (problem.sizes if device == "cuda" else problem.cpu_sizes)
    job = WorkerJob(
        mode=mode,
        problem_path=problem_copy,
        candidate_path=candidate,
        sizes=sizes,
        device=device,
        seed=seed,
        trials=trials if trials is not None else plan_trials(sizes, seed, settings().validation.distributions),
        plan=plan,
        time_eager=time_eager,
        result_path=workdir / RESULT_FILE,
        outputs_dir=outputs,
        gpu_lock=gpu_lock,
        ablate=ablate,
    )
    return write_job(workdir, job, publish)


def write_candidate(workdir: Path, code: str) -> Path:
    """The candidate's file in a workdir: UTF-8 with its byte-order mark, so the interpreter (and Triton's
    inspect.getsource) decodes it as the text the static check read, whatever coding declaration it carries (another
    is a SyntaxError)."""
    path = workdir / CANDIDATE_FILE
    path.write_bytes(codecs.BOM_UTF8 + code.encode("utf-8"))
    return path


def worker_env(device: Device) -> dict[str, str]:
    """Environment a worker needs on top of the sandbox's: our package importable, CPU mode's interpreter."""
    import agent

    root = str(Path(agent.__file__).resolve().parent.parent)
    # resolved: a link on the way (/tmp/link/site) may be masked behind the wall, its target is kept
    paths = [root] + [os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {"PYTHONPATH": os.pathsep.join(paths), "PYTHONFAULTHANDLER": "1", "PYTHONUNBUFFERED": "1"}
    if site.ENABLE_USER_SITE:  # the worker's HOME is its own: its user site is found through ours (pip install --user)
        env["PYTHONUSERBASE"] = os.path.realpath(site.getuserbase())
    if device == "cpu":
        env.update({"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"})
    else:  # one GPU: work moved to another device would run past the timed one's events and synchronize
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        env["CUDA_VISIBLE_DEVICES"] = visible or "0"
    return env


def read_result(path: Path) -> WorkerResult | None:
    """The worker's result file, or None where it never got written (crash, kill) or is unreadable."""
    try:
        return WorkerResult.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None
