"""A run's parameters, declared once: each field of RunConfig carries its flag and help (a `Flag`), what a new run
takes, whether a resume may change it, and its check (pydantic's own constraints: ge, gt, le).

Everything else is derived from it: `agent run`'s options (agent.commands.run), the config file's [run] section and
so `agent config`'s listing (agent.config.RunDefaults), the checks of a flag's value and a resume's refusal to change
what the run measures (`run_flags`, `resumed`). Adding a run parameter is one field here.

A field's default is what a record from before the field existed reads as (a run without a [DIAGNOSIS] block, greedy
search); `Flag.new` is what a new run takes where it differs (None: decided when the run starts, e.g. --device).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import annotated_types
from pydantic import Field
from pydantic.fields import FieldInfo

from agent.errors import UserError
from agent.schema import Model, Objective, Precision, SearchPolicy

DEFAULT_PROBLEM = "gap44"  # the built-in problem every command takes when none is named
AUTO = "auto"  # --stage auto: the stage ladder (agent.ladder)
DEFAULT_STAGE = "memory-fusion"  # the main job's stage (README); --stage auto begins one above the floor, here too
_SAME = object()  # Flag.new not given: a new run takes the field's default


@dataclass(frozen=True)
class Flag:
    """How a RunConfig field is set: `--NAME` on the command line, `NAME` in the config's [run] section."""

    help: str
    name: str = ""  # where it differs from the field's name (timeout_s is --timeout)
    metavar: str | None = None
    new: Any = _SAME  # what a new run takes when nothing sets it, where that is not the field's default
    resumable: bool = False  # a resumed run may change it (go on longer); the others define what the run measures
    switch: bool = False  # a bool written on/off
    unit: str = ""  # in a bound's message: "must be > 0 seconds"
    counts: str = ""  # what an upper bound counts: "at most 256 candidates per iteration"


class RunConfig(Model):
    stage: Annotated[str, Flag(f"stage to run, or auto (default: {DEFAULT_STAGE})", metavar="STAGE|auto")] = (
        DEFAULT_STAGE)
    problem: Annotated[str, Flag("built-in problem, shipped KernelBench look-alike (kb_42_...) or KernelBench-style "
                                 f"file (default: {DEFAULT_PROBLEM})", metavar="NAME|PATH")] = DEFAULT_PROBLEM
    gpu: Annotated[str, Flag("target GPU for the prompt (default: auto, detect)", metavar="auto|NAME")] = "auto"
    iterations: Annotated[int, Flag("iterations after the starting kernel (default: 5; with --resume: raise it to go "
                                    "on)", metavar="N", resumable=True)] = Field(default=5, ge=0)
    samples: Annotated[int, Flag("candidates per iteration (default: 4)", metavar="K", resumable=True,
                                 counts="candidates per iteration")] = Field(default=4, ge=1, le=256)
    llm: Annotated[str, Flag("proposer (default: openai when OPENAI_API_KEY is set, else offline)", new=None)] = (
        "offline")  # "openai" | "offline" | "replay:RUN_ID" (agent.wiring.PROPOSERS)
    model: Annotated[str, Flag("model name for --llm openai (default: gpt-4o)")] = "gpt-4o"
    llm_timeout_s: Annotated[float, Flag("seconds to wait for one model call (default: 300)", name="llm_timeout",
                                         metavar="S", resumable=True, unit="seconds")] = Field(
        default=300.0, gt=0, description="per model call; answers of thousands of tokens take minutes on slow servers")
    llm_retries: Annotated[int, Flag("retries of a model call that timed out, was rate limited or failed with 5xx "
                                     "(default: 4)", metavar="N", resumable=True)] = Field(
        default=4, ge=0, description="retries of a model call on 429, 5xx, timeouts")
    budget_usd: Annotated[float | None, Flag("stop before spending more than X", metavar="X", resumable=True)] = (
        Field(default=None, gt=0))
    device: Annotated[Literal["cuda", "cpu"], Flag("cuda, or cpu (TRITON_INTERPRET=1, reduced sizes); default: cuda "
                                                   "when available", new=None)] = "cuda"
    patience: Annotated[int, Flag("stop (or, with auto, move on) after N (default: 3) iterations without improvement",
                                  metavar="N", resumable=True)] = Field(default=3, ge=1)
    timeout_s: Annotated[float | None, Flag("per-candidate wall-clock limit (default: scaled to the problem's eager "
                                            "time on a GPU)", name="timeout", metavar="S", resumable=True,
                                            unit="seconds")] = Field(
        default=None, gt=0, description="per-candidate limit; None: scaled to the problem")
    objective: Annotated[Objective, Flag(
        "what candidates are ranked by: latency (a synchronized call, host included; default), device (GPU time of "
        "calls queued back to back) or energy (the GPU's energy per call, from NVML; where it cannot be measured, "
        "latency)")] = Field(default="latency", description="the clock the run optimizes (README: why latency)")
    precision: Annotated[Precision, Flag(
        "the numerics candidates are held to: fp32 (default: a tolerance of max(1e-4, 4x eager's own error vs fp64)), "
        "tf32 (a floor of 2e-3: TF32 products, as cuDNN and torch.compile's channels-last convolutions use under "
        "PyTorch's defaults; torch.compile's answer is held to the same) or kernelbench (KernelBench's own check, to "
        "compare with published results: allclose with atol=rtol=1e-2 on 5 draws of the problem's get_inputs() at its "
        "own sizes)")] = Field(default="fp32", description="the numerics candidates (and torch.compile's own answer) "
                                                           "are held to: fp32, tf32's wider tolerance floor, or "
                                                           "KernelBench's own check (agent.harness.judge.kernelbench)")
    seed: Annotated[int, Flag("seed for weights and validation inputs (default: 0)")] = 0
    energy: Annotated[bool, Flag("measure every correct candidate's energy per call (NVML: about 4 s of the GPU to "
                                 "itself each; default: off, on with --objective energy)", new=False, switch=True,
                                 resumable=True)] = Field(
        default=True, description="energy measured for every candidate (runs recorded before the flag always did)")
    diagnosis: Annotated[bool, Flag("a [DIAGNOSIS] block of findings from the current best's profile and clocks in "
                                    "every prompt (default: on)", new=True, switch=True)] = Field(
        default=False, description="a [DIAGNOSIS] block in the prompts (runs recorded before it existed had none, "
                                   "and re-render without it)")
    start: Annotated[Literal["problem", "inductor", "both"], Flag(
        "iteration 0's answers: the problem's starting kernel, torch.compile's own kernels made into an answer (GPU "
        "only: captured in a sandboxed worker at the problem's sizes), or both (default: problem)")] = Field(
        default="problem", description="iteration 0's answers: the problem's starting kernel, torch.compile's own "
                                       "kernels (agent.inductor; GPU only), or both")
    search: Annotated[SearchPolicy, Flag(
        "where each sample of a round starts from: greedy (the run's best), beam (the --beam best distinct candidates; "
        "default), tree (a UCT score of each candidate's gain and how little it was explored: README)", new="beam")] = (
        Field(default="greedy", description="how a round's parents are chosen (agent.search)"))
    beam: Annotated[int, Flag("--search beam: how many of the best distinct candidates are parents (default: 3)",
                              metavar="B", counts="parents")] = Field(
        default=3, ge=1, le=64, description="--search beam: the B best distinct candidates are the parents")
    memory: Annotated[bool, Flag("a [MEMORY] block of what the run tried and what came of it in every prompt "
                                 "(default: on)", new=True, switch=True)] = Field(
        default=False, description="a [MEMORY] block of what this run tried in the prompts (runs recorded before it "
                                   "existed had none, and re-render without it)")
    max_candidates: Annotated[int | None, Flag("stop once N proposals were judged (a round is cut to fit; with "
                                               "--resume: change it)", metavar="N", resumable=True)] = Field(
        default=None, ge=1, description="stop once this many proposals were judged")
    max_minutes: Annotated[float | None, Flag("start no round after M minutes of this command (a running round "
                                              "finishes; with --resume: change it)", metavar="M", resumable=True)] = (
        Field(default=None, gt=0, description="start no round after this many minutes of this invocation"))
    root: Path = Path(".")  # the store's folder: --root, found by agent.store.locate, not a run parameter


@dataclass(frozen=True)
class RunFlag:
    """One RunConfig field as a flag: its option, the type and choices argparse takes, its check and conversions."""

    field: str
    flag: Flag
    info: FieldInfo

    @property
    def name(self) -> str:
        """The argparse dest and the config file's key."""
        return self.flag.name or self.field

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def kind(self) -> type:
        """What argparse converts the text to (str for a choice or a name)."""
        inner = [a for a in get_args(self.info.annotation) if a is not type(None)] or [self.info.annotation]
        return inner[0] if inner[0] in (int, float) else str

    @property
    def choices(self) -> tuple[str, ...] | None:
        if self.flag.switch:
            return ("on", "off")
        annotation = self.info.annotation
        return tuple(get_args(annotation)) if get_origin(annotation) is Literal else None

    @property
    def new(self) -> Any:
        """What a new run takes when neither a flag nor the user's config sets it, as the flag writes it."""
        return self.shown(self.info.default if self.flag.new is _SAME else self.flag.new)

    def bound(self, kind: type) -> Any:
        return next((getattr(m, kind.__name__.lower()) for m in self.info.metadata if isinstance(m, kind)), None)

    def check(self, value: Any) -> None:
        """The field's constraints, as one line naming the flag."""
        if value is None:
            return
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        unit = f" {self.flag.unit}" if self.flag.unit else ""
        if (ge := self.bound(annotated_types.Ge)) is not None and not value >= ge:
            raise UserError(f"{self.option} must be ≥ {ge}{unit}, got {shown}")
        if (gt := self.bound(annotated_types.Gt)) is not None and not value > gt:  # nan too
            raise UserError(f"{self.option} must be > {gt}{unit}, got {shown}")
        if (le := self.bound(annotated_types.Le)) is not None and value > le:
            raise UserError(f"{self.option} {shown}: at most {le} {self.flag.counts}".rstrip())

    def shown(self, value: Any) -> Any:
        """As the flag and the config file write it (a switch: on/off)."""
        return ("on" if value else "off") if self.flag.switch and isinstance(value, bool) else value

    def stored(self, value: Any) -> Any:
        """As RunConfig holds it."""
        return value == "on" if self.flag.switch and isinstance(value, str) else value


def run_flags(model: type[RunConfig] | None = None) -> list[RunFlag]:
    """Every run parameter that is a flag, in RunConfig's order (the order of `--help` and of `agent config`);
    `model`: a RunConfig with more fields (a test's)."""
    out = []
    for name, info in (model or RunConfig).model_fields.items():
        flag = next((m for m in info.metadata if isinstance(m, Flag)), None)
        if flag is not None:
            out.append(RunFlag(name, flag, info))
    return out


def flag_values(given: Mapping[str, Any], defaults: Mapping[str, Any] | None,
                model: type[RunConfig] | None = None) -> dict[str, Any]:
    """Each flag's value by name, checked: the one given, else for a new run (`defaults`: the user's config, by flag
    name) the user's default, else the built-in one; on resuming (`defaults` None) only the flags given."""
    values = {}
    for f in run_flags(model):
        value = given.get(f.name)
        if value is None and defaults is not None:
            value = f.new if defaults.get(f.name) is None else defaults[f.name]
        f.check(value)
        values[f.name] = value
    return values


def new_config(values: Mapping[str, Any], model: type[RunConfig] | None = None, **also: Any) -> RunConfig:
    """A new run's RunConfig from the flags' values by flag name (flag_values); `also`: fields that are no flag (root)
    or were decided when the run started (llm, device)."""
    model = model or RunConfig
    fields = {f.field: f.stored(values[f.name]) for f in run_flags(model) if values.get(f.name) is not None}
    return model(**{**fields, **also})


def resumed(config: RunConfig, given: Mapping[str, Any], run_id: str) -> RunConfig:
    """The recorded `config` with the flags given on resuming (flag_values) applied; a flag that would change what
    the run measures is one line."""
    update = {}
    for f in run_flags(type(config)):
        value = given.get(f.name)
        if value is None:
            continue
        had = f.shown(getattr(config, f.field))
        if not f.flag.resumable and value != had:
            raise UserError(f"{f.option} {value}: run {run_id} was started with {had} and a resumed run keeps it",
                            "start a new run to change it")
        update[f.field] = f.stored(value)
    return config.model_copy(update=update)
