"""Typed data shared by every module: the ground floor (imports nothing of ours).

Every boundary between steps of the loop (render -> propose -> evaluate -> profile -> record)
passes one of these models. A failed step is a verdict plus a message, never a sentinel value.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Number = int | float
# {kernel_name: {metric_name: value}}: the shape of the seed's [NCU PROFILING METRICS] block.
MetricTable = dict[str, dict[str, Number]]
SizeOverrides = dict[str, Number]


class Model(BaseModel):
    """Base for all our models: unknown fields are a bug, not something to ignore."""

    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- targets and stages


class GPUSpec(Model):
    """One catalog entry; the fields are exactly what the prompt's "# Target GPU" block shows."""

    key: str = Field(description="short catalog key, e.g. '4090', 'h100'")
    name: str = Field(description="what the prompt prints after 'GPU Name:'")
    aliases: list[str] = Field(default_factory=list, description="names torch may report, e.g. 'NVIDIA GeForce RTX 4090'")
    architecture: str
    compute_capability: str
    sms: int
    memory_bandwidth_gbs: Number
    fp32_tflops: Number = Field(description="plain FP32 (non-tensor) peak at boost clock: the roofline's compute ceiling "
                                            "where a report lacks ncu's own (not shown in the prompt)")
    tf32_tflops: Number
    bf16_tflops: Number
    fp16_tflops: Number
    max_registers_per_thread: int = 255
    max_threads_per_block: int = 1024
    max_threads_per_sm: int
    warp_size: int = 32
    max_warps_per_sm: int
    smem_per_sm_kb: int
    smem_per_block_kb: int
    l2_mb: Number
    max_blocks_per_sm: int = Field(default=32, description="programs one SM holds at once whatever their resources "
                                                            "(sm_80/sm_90: 32, sm_86: 16, sm_89: 24); not shown")


class StageRules(Model):
    """What a stage adds to the common rules: a static one checked on the AST before anything runs, and a run-time
    one checked on what the candidate's Triton launches wrote (agent.harness.judge.rules)."""

    forbid_store_then_load: bool = Field(default=False, description="static: a kernel may not load back a value it "
                                                                    "stored at the same address")
    max_intermediate_write: float | None = Field(
        default=None, description="run time: the bytes a Triton kernel may write to buffers other than the returned "
                                  "tensor, as a fraction of the forward's largest tensor (None: no limit)")
    intermediate_reason: str = Field(default="", description="why that fraction (shown with a violation)")


class Stage(Model):
    name: str
    focus: str
    template: str = Field(description="template file name under prompts/")
    metrics: list[str] = Field(description="ncu metrics the prompt shows, in prompt order")
    rules: StageRules = Field(default_factory=StageRules)
    entered_for: str | None = Field(default=None, description="--stage auto enters it only for this bottleneck kind")
    allows: list[str] = Field(default_factory=list, description="what the stage's rules allow that its text may seem "
                                                                 "to forbid: the prompt says it with the diagnosis")


# ---------------------------------------------------------------- problems


class SizeSet(Model):
    """A named set of size-global overrides; {} means the problem's own sizes."""

    label: str
    overrides: SizeOverrides = Field(default_factory=dict)
    distributions: list[str] | None = Field(default=None, description="input distributions tried at this size "
                                                                      "(None: all of the harness's)")


class ProblemSpec(Model):
    """A KernelBench-style problem: a file with Model, get_inputs(), get_init_inputs() and size globals."""

    name: str
    path: Path
    description: str = ""
    start: Path | None = Field(default=None, description="starting kernel (a ModelNew file), if any")
    sizes: list[SizeSet] = Field(description="validation sizes on the GPU; the first is the timed size")
    cpu_sizes: list[SizeSet] = Field(description="validation sizes in CPU mode (TRITON_INTERPRET=1); the first is timed")


# ---------------------------------------------------------------- proposing


class Usage(Model):
    """Tokens and what they cost. `priced` is False where some tokens came from a model with no known price (a local
    server, a model missing from the price table): cost_usd then counts only the priced ones, and the cost is shown
    as unknown, never as $0."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    priced: bool = True

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            priced=self.priced and other.priced,
        )


class Answer(Model):
    """One proposal: the raw text a proposer returned, and what it cost."""

    text: str
    model: str
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    raw: str | None = Field(default=None, description="raw response body (JSON) as received, for the record")
    idea: str = Field(default="", description="what the answer tries, in a few words, where the proposer knows it "
                                              "(the offline proposer's variant); else agent.memory derives it")


class Feedback(Model):
    """One earlier attempt, as the next prompt's feedback block shows it."""

    candidate: str
    verdict: Verdict
    message: str


# ---------------------------------------------------------------- evaluating


class Verdict(StrEnum):
    NO_CODE = "no_code"
    SYNTAX_ERROR = "syntax_error"
    RULE_VIOLATION = "rule_violation"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    INCORRECT = "incorrect"
    CORRECT = "correct"
    # CPU mode cannot judge it: its work depends on the device or the interpreter (a branch on `x.is_cuda` or
    # TRITON_INTERPRET whose paths differ, a CUDA assert): neither correct nor a failure of the answer; on a GPU it is
    # judged as any other (agent.harness.static.gpuonly)
    NEEDS_GPU = "needs_gpu"

    @property
    def failed(self) -> bool:
        """A failure of the answer (what a next prompt is told to fix): neither correct nor needs_gpu."""
        return self not in (Verdict.CORRECT, Verdict.NEEDS_GPU)


class Check(Model):
    """One validation trial: a size, an input distribution, and how far the candidate was from the truth."""

    size: str
    shapes: list[list[int]] = Field(default_factory=list, description="input tensor shapes")
    distribution: str
    error: float | None = Field(default=None, description="candidate's relative error vs the fp64 truth")
    eager_error: float | None = Field(default=None, description="the problem's own Model in fp32, same flags")
    tolerance: float | None = None
    passed: bool
    note: str = ""


# What ranks candidates: one of the two clocks, or the GPU's energy per call (agent.harness.worker.energy).
Objective = Literal["latency", "device", "energy"]
OBJECTIVES: tuple[Objective, ...] = ("latency", "device", "energy")
SearchPolicy = Literal["greedy", "beam", "tree"]
# The numerics a candidate is held to: fp32 (the default), or tf32 (10-bit-mantissa products admitted, as PyTorch's
# own default lets cuDNN do; torch.compile's channels-last convolutions rely on it): agent.harness.settings.tolerance
Precision = Literal["fp32", "tf32", "kernelbench"]
# What a leaderboard row, `--json` progress events and the store index carry of a Timing, in this order.
CLOCK_KEYS = ("objective", "candidate_ms", "speedup_vs_eager", "speedup_vs_compile", "device_ms", "latency_ms",
              "host_ms", "launches", "device_speedup_vs_eager", "latency_speedup_vs_eager", "device_speedup_vs_compile",
              "latency_speedup_vs_compile", "energy_mj", "energy_note")
NOT_RECORDED = "recorded before energy was measured"


class Timing(Model):
    """Two clocks, medians over many calls; spread is (p80 - p20) / median, in percent.

    device:  CUDA events around calls queued back to back, each after an L2 flush: the GPU's time for a forward.
    latency: one synchronized call from an idle GPU (after a flush), host dispatch included: what a caller of
             forward waits. A host-bound candidate (launches and Python slower than its kernels) differs 2-4x.
    candidate_ms, eager_ms, compile_ms and the speedups follow `objective`, the clock the run optimizes (with the
    energy objective: the device clock, the one whose calls run back to back as the energy loop's do); the
    clock-named fields are there whatever the objective.

    energy: the GPU's energy per call in mJ (NVML's counter around blocks of calls queued back to back; spread over
            the blocks), for the candidate and each baseline. Where it was not measured, energy_note says why.
    """

    objective: Objective = "device"
    candidate_ms: float
    candidate_spread_pct: float
    device_ms: float | None = None
    device_spread_pct: float | None = None
    latency_ms: float | None = None
    latency_spread_pct: float | None = None
    host_ms: float | None = Field(default=None, description="host time to issue one call (until forward returns)")
    launches: int | None = Field(default=None, description="Triton kernel launches per forward (most in a timed call)")
    eager_ms: float | None = None
    eager_spread_pct: float | None = None
    eager_device_ms: float | None = None
    eager_latency_ms: float | None = None
    compile_ms: float | None = None
    compile_spread_pct: float | None = None
    compile_device_ms: float | None = None
    compile_latency_ms: float | None = None
    compile_error: float | None = Field(default=None, description="torch.compile's own relative error vs the fp64 "
                                        "truth on the timed inputs: its speed is only a fair mark within tolerance")
    compile_tolerance: float | None = None
    compile_fp32_device_ms: float | None = Field(default=None, description="torch.compile with TF32 off (fp32 "
                                                 "numerics): timed only where the default one is outside tolerance")
    compile_fp32_latency_ms: float | None = None
    compile_fp32_error: float | None = None
    device_speedup_vs_compile_fp32: float | None = None
    latency_speedup_vs_compile_fp32: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    device_speedup_vs_eager: float | None = None
    latency_speedup_vs_eager: float | None = None
    device_speedup_vs_compile: float | None = None
    latency_speedup_vs_compile: float | None = None
    energy_mj: float | None = Field(default=None, description="GPU energy per call, millijoules")
    energy_spread_pct: float | None = None
    eager_energy_mj: float | None = None
    eager_energy_spread_pct: float | None = None
    compile_energy_mj: float | None = None
    compile_energy_spread_pct: float | None = None
    energy_vs_eager: float | None = Field(default=None, description="eager's energy per call / the candidate's")
    energy_vs_compile: float | None = None
    power_w: float | None = Field(default=None, description="the GPU's mean power while the calls ran back to back")
    energy_note: str = Field(default="", description="why energy_mj is None")
    repeats: int
    meaningful: bool = Field(description="False in CPU mode: interpreter timings say nothing about the GPU")
    note: str = ""

    @model_validator(mode="before")
    @classmethod
    def _one_clock_records(cls, data: Any) -> Any:
        """Records from before the two clocks: their time was the device clock, `wall_ms` the latency cross-check."""
        if isinstance(data, dict) and "device_ms" not in data and "candidate_ms" in data:
            data = dict(data)
            wall = data.pop("wall_ms", None)
            data.setdefault("objective", "device")
            data.update(device_ms=data["candidate_ms"], device_spread_pct=data.get("candidate_spread_pct"),
                        latency_ms=wall, eager_device_ms=data.get("eager_ms"), compile_device_ms=data.get("compile_ms"),
                        device_speedup_vs_eager=data.get("speedup_vs_eager"),
                        device_speedup_vs_compile=data.get("speedup_vs_compile"))
        if isinstance(data, dict) and data.get("energy_mj") is None and not data.get("energy_note"):
            data = {**data, "energy_note": NOT_RECORDED}  # a record from before energy: say so, never a blank
        return data

    def keys(self) -> dict[str, Any]:
        """The figures a leaderboard row or a progress event carries: the objective's, then each clock's."""
        return {k: getattr(self, k) for k in CLOCK_KEYS}

    def clock(self, objective: Objective) -> tuple[float, float]:
        """(median, spread %) of the candidate on `objective`: ms on a clock (the run's clock where it lacks one), mJ
        per call for energy (where energy was not measured: the latency clock, so a run without a counter still
        ranks; `ranks_by` says which)."""
        if objective == "energy":
            if self.energy_mj is not None:
                return self.energy_mj, self.energy_spread_pct if self.energy_spread_pct is not None else 0.0
            objective = "latency"
        if objective == "latency" and self.latency_ms is not None:
            return self.latency_ms, self.latency_spread_pct if self.latency_spread_pct is not None else 0.0
        if objective == "device" and self.device_ms is not None:
            return self.device_ms, self.device_spread_pct if self.device_spread_pct is not None else 0.0
        return self.candidate_ms, self.candidate_spread_pct

    def ranks_by(self, objective: Objective) -> Objective:
        """What clock() measures for `objective`: energy falls back to latency where energy was not measured."""
        return "latency" if objective == "energy" and self.energy_mj is None else objective


class EvalResult(Model):
    verdict: Verdict
    message: str = Field(description="the part an LLM needs to fix it, with the candidate's line numbers")
    checks: list[Check] = Field(default_factory=list)
    timing: Timing | None = None
    kernels: list[str] = Field(default_factory=list, description="names of the candidate's @triton.jit kernels")
    code: str | None = Field(default=None, description="the extracted candidate source that was evaluated")
    device: str = "cpu"
    duration_s: float = 0.0
    phases: dict[str, float] = Field(default_factory=dict, description="seconds per phase of the evaluation, in order")


# ---------------------------------------------------------------- profiling


class RuleResult(Model):
    """One of ncu's guided-analysis rule results (full set only)."""

    rule: str
    title: str = ""
    kind: str = Field(default="", description="ncu's message type: 'ok', 'warning', 'error', 'optimization', ...")
    message: str = ""
    estimated_speedup_pct: float | None = None


class KernelProfile(Model):
    """Metrics of one kernel name; several launches are aggregated (see ncu.py for how)."""

    name: str
    launches: int = 1
    grid: list[int] | None = None
    block: list[int] | None = None
    metrics: dict[str, Number] = Field(default_factory=dict)
    rules: list[RuleResult] = Field(default_factory=list)


class Bottleneck(Model):
    kind: Literal["memory-bound", "compute-bound", "latency-bound", "launch-bound", "host-bound", "unknown"]
    reason: str = Field(description="one line with the numbers that led to it")
    figures: dict[str, float] = Field(default_factory=dict)


class Profile(Model):
    report: Path | None = None
    metric_set: Literal["stage", "full"] = "stage"
    gpu: str = ""
    kernels: dict[str, KernelProfile] = Field(default_factory=dict)
    bottleneck: Bottleneck | None = None
    wall_s: float = 0.0
    phases: dict[str, float] = Field(default_factory=dict, description="seconds of the profiling run by phase "
                                     "(agent.profiler.profile_phases): where a profile's time goes")

    def table(self) -> MetricTable:
        """The prompt-shaped {kernel: {metric: value}} view."""
        return {name: dict(k.metrics) for name, k in self.kernels.items()}


# ---------------------------------------------------------------- runs


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Group(Model):
    """One (parent, stage) pair of a round and how many of its samples it gets (agent.search); the prompt rendered
    for it, once chosen."""

    parent: str | None = Field(description="the candidate whose code the prompt shows (None: no correct code yet)")
    stage: str
    k: int = Field(ge=1)
    prompt: str = ""


class Candidate(Model):
    """Everything recorded about one proposal, written after every candidate."""

    id: str
    run_id: str
    iteration: int
    index: int
    stage: str
    code: str | None = None
    prompt: str = ""
    answer: Answer | None = None
    result: EvalResult
    profile: Profile | None = None
    parent: str | None = Field(default=None, description="the candidate whose code the prompt showed (None: the "
                               "starting kernel, or no correct code yet)")
    idea: str = Field(default="", description="what it tried, in a few words (agent.memory.idea_of)")
    finding: str | None = Field(default=None, description="the parent's first finding (agent.diagnosis) that the "
                                "prompt showed: what the answer was asked to address")
    created_at: datetime = Field(default_factory=_now)


# A round's verdicts as they become final: (the answer's index in the round, its result); called from any thread.
OnResult = Callable[[int, EvalResult], None]

Feedback.model_rebuild()
