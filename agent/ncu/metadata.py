"""Metric names the reader and the classifier rely on, and the metric metadata in `agent/data/metrics.toml`
(labels, units, which way is better, aliases, classification thresholds)."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agent.datafiles import load_toml
from agent.schema import KernelProfile, Profile

DURATION = "gpu__time_duration.sum"
GRID = "launch__grid_size"
BLOCK = "launch__block_size"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
WARPS = "sm__warps_active.avg.pct_of_peak_sustained_active"
SM_COUNT = ("launch__sm_count", "device__attribute_multiprocessor_count")
GPU_NAME = "device__attribute_display_name"
GRID_DIMS = ("launch__grid_dim_x", "launch__grid_dim_y", "launch__grid_dim_z")
BLOCK_DIMS = ("launch__block_dim_x", "launch__block_dim_y", "launch__block_dim_z")
# What classify() reads; read_report always reads these (when the report has them) to fill Profile.bottleneck.
CLASSIFY_INPUTS = (DURATION, DRAM, SM, WARPS, GRID)


class MetricInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str
    unit: str = ""
    direction: Literal["higher", "lower", "neutral"] = "neutral"


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")
    launch_us: float
    bound_pct: float
    low_warps_pct: float
    near_peak_dram_pct: float
    near_roof_pct: float
    host_factor: float
    host_gap_us: float
    outside_share: float
    same_pct: float


class MetricsMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metrics: dict[str, MetricInfo]
    aliases: dict[str, list[str]]
    bottleneck: Thresholds


@lru_cache(maxsize=1)
def meta() -> MetricsMeta:
    """The metric metadata file, parsed once."""
    return MetricsMeta.model_validate(load_toml("metrics.toml"))


def longest_kernel(profile: Profile | None) -> KernelProfile | None:
    """The profile's kernel with the most GPU time: the one that decides the time, and what a profile is judged by."""
    if profile is None or not profile.kernels:
        return None
    return max(profile.kernels.values(), key=lambda k: float(k.metrics.get(DURATION, -1.0) or -1.0))


def metric_info(name: str) -> MetricInfo:
    """Label, unit and direction of a metric (a neutral placeholder for metrics the file doesn't list)."""
    return meta().metrics.get(name) or MetricInfo(label=name)
