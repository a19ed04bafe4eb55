"""Harness settings (tolerances, timing, rules, sandbox limits) read from agent/data/harness.toml."""

from __future__ import annotations

import math
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from agent.datafiles import load_toml


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ValidationSettings(_Section):
    distributions: list[str]
    wide_distribution: str | None = None
    tolerance_floor: float
    tolerance_factor: float
    tf32_tolerance_floor: float
    kernelbench_tolerance: float
    kernelbench_trials: int = Field(ge=1)


class TimingSettings(_Section):
    warmup_calls: int
    target_ms: float
    min_reps: int
    max_reps: int
    flush_mb: int
    latency_window_ms: float
    latency_max_reps: int
    head_start_max_ms: float
    wall_factor: float
    wall_slack_ms: float
    cpu_reps: int
    checked_calls: int
    energy_blocks: int = Field(ge=1)
    energy_block_ms: float
    energy_periods: int
    energy_max_calls: int
    energy_checked_calls: int


class RuleSettings(_Section):
    pytorch_compute: float
    heavy_factor: float
    heavy_slack: float = Field(ge=0)
    floor_factor: float


class SandboxSettings(_Section):
    timeout_s: float
    cpu_config_passes_timed: int = Field(ge=1)
    start_allowance_s: float
    slowdown: float
    gpu_slots: int = Field(ge=1)
    baseline_timeout_s: float
    max_queue_s: float
    reference_timeout_s: float
    memory_mb_cpu: int
    memory_mb_gpu: int
    file_limit_mb: int
    output_limit_bytes: int
    tmpfs_mb: int
    max_processes: int
    warm_workers: bool = True


class CacheSettings(_Section):
    max_mb: float


class Settings(_Section):
    validation: ValidationSettings
    timing: TimingSettings
    rules: RuleSettings
    sandbox: SandboxSettings
    cache: CacheSettings


@lru_cache(maxsize=1)
def settings() -> Settings:
    """The harness settings (parsed once per process)."""
    return Settings.model_validate(load_toml("harness.toml"))


def tolerance(eager_error: float, precision: str = "fp32") -> float:
    """max(floor, factor * eager error): scaled to the problem, never looser than PyTorch itself needs; the floor is
    TF32's where the run admits TF32 products (--precision tf32)."""
    v = settings().validation
    if not math.isfinite(eager_error):
        # eager fp32 itself is wrong in kind here (NaN or Inf where the truth is finite and within fp32's range: an
        # intermediate overflow the fp64 truth does not have; agent.harness.judge.validate.rel_error). It gives no scale,
        # and widening by it would pass any answer (max(floor, inf) is inf). No finite widening helps an answer that
        # overflows as eager does (a non-finite output where the truth is finite fails at any tolerance), so the
        # output is held to the floor: an answer that computes it is right, one that does not is told what it got.
        return widened(v.tolerance_floor, precision)
    return max(widened(v.tolerance_floor, precision), v.tolerance_factor * eager_error)


def widened(tol: float, precision: str) -> float:
    """An fp32 tolerance as `precision` holds it (tf32: at least TF32's floor; kernelbench: at least its 1e-2, a
    relative error standing for its element-wise test where one number is shown, torch.compile's)."""
    v = settings().validation
    return max(tol, v.tf32_tolerance_floor) if precision == "tf32" else \
        max(tol, v.kernelbench_tolerance) if precision == "kernelbench" else tol
