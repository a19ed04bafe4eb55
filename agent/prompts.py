"""Render a stage's prompt from its jinja2 template (prompts/*.j2) and the current state.

Templates are found inside the installed package first (the wheel carries prompts/ as agent/prompts), else in the
repository's top-level prompts/. StrictUndefined: a variable a template uses but render() does not pass is an error,
not an empty string. The memory-fusion stage renders the seed document byte for byte.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.diagnosis.model import Finding
from agent.errors import UserError
from agent.harness.settings import settings
from agent.schema import (EvalResult, Feedback, GPUSpec, MetricTable, Number, Objective, Precision, ProblemSpec, Profile,
                          Stage, Timing)

# What the [NCU PROFILING METRICS] block says when there is nothing to show (CPU mode has no ncu; a kernel that
# was never profiled has no report). Stated plainly so that an LLM reasons from the code instead of inventing numbers.
NO_METRICS = "(none: the current code has not been profiled with ncu yet; reason from the code and the GPU specs)"

# A feedback message longer than this keeps its head and its tail: a traceback's last lines name the error,
# a validation message's first lines name the failing check.
MAX_FEEDBACK_CHARS = 2000


class PromptInput(BaseModel):
    """Everything a stage prompt shows."""

    model_config = ConfigDict(extra="forbid")
    stage: Stage
    gpu: GPUSpec
    code: str
    metrics: MetricTable = Field(default_factory=dict)
    feedback: list[Feedback] = Field(default_factory=list)
    reference: str | None = Field(default=None, description="the problem file's source (the PyTorch Model)")
    timing: Timing | None = Field(default=None, description="the current code's two clocks ([TIMING], GPU only)")
    objective: Objective = "latency"
    diagnosis: list[Finding] = Field(default_factory=list, description="[DIAGNOSIS]: findings, most valuable first")
    memory: list[str] = Field(default_factory=list, description="[MEMORY]: what the run tried, one line each "
                              "(agent.memory.lines)")
    precision: Precision = Field(default="fp32", description="--precision: tf32 and kernelbench add a [NUMERICS] block")


def templates_dir() -> Path:
    """Where the templates are: inside the installed package, else the repository's prompts/."""
    import agent

    packaged = Path(agent.__file__).parent / "prompts"
    if packaged.is_dir():
        return packaged
    return Path(agent.__file__).resolve().parent.parent / "prompts"


def format_number(value: Number) -> str:
    """A number as the prompt prints it: integral values without '.0' (1008, not 1008.0), others as written."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@lru_cache(maxsize=1)
def _env():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,  # the seed ends with a newline; so must the render
        trim_blocks=True,  # a line holding only a {% tag %} leaves no blank line behind
        lstrip_blocks=True,
        autoescape=False,  # code, not HTML
    )
    env.filters["num"] = format_number
    return env


def _round(value: Number) -> Number | None:
    """Two decimals; integral values as integers (the seed prints a grid size of 32, and 32.0 prints as 32 too)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if not math.isfinite(value):
        return None  # JSON has no NaN: null says "no value"
    r = round(float(value), 2)
    return int(r) if r.is_integer() else r


def format_metrics(table: MetricTable) -> str:
    """The [NCU PROFILING METRICS] block's body: JSON, indent 2, values rounded; NO_METRICS when the table is empty."""
    if not table:
        return NO_METRICS
    return json.dumps({k: {m: _round(v) for m, v in ms.items()} for k, ms in table.items()}, indent=2)


def stage_table(table: MetricTable, stage: Stage) -> MetricTable:
    """Keep, per kernel, the stage's metrics in the stage's order (others dropped; missing ones omitted)."""
    return {kernel: {m: ms[m] for m in stage.metrics if m in ms} for kernel, ms in table.items()}


def load_metrics_json(path: Path | str) -> MetricTable:
    """Read a `{kernel: {metric: number}}` JSON file (the seed's shape); anything else is a one-line UserError."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"metrics file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read metrics file {path}: {e}") from None
    except json.JSONDecodeError as e:
        raise UserError(f"metrics file {path} is not valid JSON: {e.msg} at line {e.lineno}") from None

    class _Table(BaseModel):
        model_config = ConfigDict(strict=True)
        table: dict[str, dict[str, int | float]]

    if isinstance(data, dict):
        for ms in data.values():  # bool is an int to pydantic's strict mode too: say it plainly
            if isinstance(ms, dict) and any(isinstance(v, bool) for v in ms.values()):
                raise UserError(f"metrics file {path} must map kernel -> metric -> number; found true/false")
    try:
        return _Table(table=data).table
    except ValidationError as e:
        first = e.errors()[0]
        where = "/".join(str(p) for p in first["loc"][1:]) or "top level"
        raise UserError(
            f"metrics file {path} must map kernel -> metric -> number; at {where}: {first['msg']}"
        ) from None


def _clip(message: str) -> str:
    message = message.rstrip()
    if len(message) <= MAX_FEEDBACK_CHARS:
        return message
    half = MAX_FEEDBACK_CHARS // 2
    return f"{message[:half]}\n[... {len(message) - 2 * half} characters cut ...]\n{message[-half:]}"


def _with_newline(text: str) -> str:
    # The templates close a ```python fence right after the code: the code must end its last line.
    return text if not text or text.endswith("\n") else text + "\n"


def render(inp: PromptInput) -> str:
    """The stage's prompt for this GPU, code, metrics (filtered to the stage's list) and feedback."""
    from agent.stages import absent_triton_functions

    template = _env().get_template(inp.stage.template)
    feedback = [f.model_copy(update={"message": _clip(f.message)}) for f in inp.feedback]
    return template.render(
        stage=inp.stage,
        gpu=inp.gpu,
        code=_with_newline(inp.code) if inp.code.strip() else "",
        metrics_text=format_metrics(stage_table(inp.metrics, inp.stage)),
        feedback=feedback,
        reference=_with_newline(inp.reference) if inp.reference and inp.reference.strip() else None,
        absent=absent_triton_functions(),
        timing_text=timing_text(inp.timing, inp.objective),
        diagnosis=inp.diagnosis,
        memory=inp.memory,
        precision=inp.precision,
        tf32_floor=settings().validation.tf32_tolerance_floor,
        kernelbench_tol=f"{settings().validation.kernelbench_tolerance:g}",
    )


def timing_text(timing: Timing | None, objective: Objective) -> str:
    """The [TIMING] block: both clocks of the current code, launches, and a host-bound verdict ("" on the CPU)."""
    from agent.hostbound import host_bound

    if timing is None or not timing.meaningful or timing.device_ms is None or timing.latency_ms is None:
        return ""
    lines = [
        f"GPU time per forward: {timing.device_ms:.4f} ms (CUDA events, calls queued back to back)",
        f"Latency per call: {timing.latency_ms:.4f} ms (one synchronized call from an idle GPU, Python included)",
    ]
    if timing.launches is not None:
        lines.append(f"Kernel launches per forward: {timing.launches}")
    if timing.energy_mj is not None:
        lines.append(f"GPU energy per forward: {timing.energy_mj:.4g} mJ (NVML's counter, calls queued back to back)")
    clock = {"latency": "latency per call", "device": "GPU time"}.get(objective, "GPU energy per forward")
    lines.append(f"Optimized clock: {clock}")
    host = host_bound(timing)
    if host is not None:
        lines.append(f"Host-bound: the call takes {timing.latency_ms / timing.device_ms:.1f}x its GPU time; "
                     f"{host.figures['host_us']:.0f} us go to issuing it from Python. Fewer launches and less "
                     "host work per call pay more now than faster kernels.")
    return "\n".join(lines)


# ---------------------------------------------------------------- one group's prompt in a run


class Parent(Protocol):
    """What a prompt shows of the code it asks to improve (agent.loop.Best)."""

    code: str
    profile: Profile | None
    timing: Timing | None
    objective: Objective


def iteration_prompt(stage: Stage, gpu: GPUSpec, problem: ProblemSpec, best: Parent | None,
                     last_results: list[EvalResult], diagnosis: bool = False, memory: list[str] | None = None,
                     precision: Precision = "fp32") -> str:
    """The prompt of one group of an iteration: its parent's code (`best`: the current best under greedy), metrics and
    (with `diagnosis`) findings, the last round's failures, and (`memory`, agent.memory.lines) what the run tried."""
    from agent.diagnosis import for_prompt
    from agent.problems import starting_code

    return render(PromptInput(
        stage=stage, gpu=gpu, code=best.code if best else (starting_code(problem) or ""),
        metrics=best.profile.table() if best and best.profile else {},
        feedback=feedback(last_results), reference=problem.path.read_text(),
        timing=best.timing if best else None, objective=best.objective if best else "latency",
        diagnosis=for_prompt(best.profile, best.timing) if diagnosis and best else [],
        memory=memory or [], precision=precision,
    ))


def feedback(results: list[EvalResult]) -> list[Feedback]:
    """Last iteration's failures, compactly: the harness's message is what a model needs to fix it (needs_gpu is no
    failure: CPU mode could not judge the answer, there is nothing in it to fix)."""
    return [
        Feedback(candidate=f"#{i}", verdict=r.verdict, message=r.message.strip().splitlines()[0][:300] if r.message else "")
        for i, r in enumerate(results, start=1)
        if r.verdict.failed
    ][:6]
