"""Nsight Compute reports as data: read a `.ncu-rep` into a Profile, diff two profiles, classify the bottleneck.

Pure apart from reading the report: no GPU, no clock. Reports are read with NVIDIA's `ncu_report` module (PyPI
`ncu-report`, works without a GPU or ncu); where it cannot be imported, with `ncu -i REPORT --csv --page raw`.
Metric metadata (labels, units, which way is better, aliases, classification thresholds) lives in
`agent/data/metrics.toml`.

One job per module: `metadata` (metric names and metadata), `launches` (launches and their aggregation), `rawcsv`
(the `ncu --csv` fallback), `report` (reading a report), `analysis` (stage sets, diff, classify). The public names
are re-exported here; helpers stay in their modules.
"""

from agent.ncu.analysis import Direction, MetricDelta, classify, diff, stage_metric_set
from agent.ncu.launches import aggregate
from agent.ncu.metadata import (
    BLOCK,
    BLOCK_DIMS,
    CLASSIFY_INPUTS,
    DRAM,
    DURATION,
    GPU_NAME,
    GRID,
    GRID_DIMS,
    SM,
    SM_COUNT,
    WARPS,
    MetricInfo,
    MetricsMeta,
    Thresholds,
    longest_kernel,
    meta,
    metric_info,
)
from agent.ncu.rawcsv import parse_raw_csv
from agent.ncu.report import read_launches, read_report

__all__ = [
    "BLOCK", "BLOCK_DIMS", "CLASSIFY_INPUTS", "DRAM", "DURATION", "GPU_NAME", "GRID", "GRID_DIMS", "SM", "SM_COUNT",
    "WARPS", "Direction", "MetricDelta", "MetricInfo", "MetricsMeta", "Thresholds", "aggregate", "classify", "diff",
    "longest_kernel", "meta", "metric_info", "parse_raw_csv", "read_launches", "read_report", "stage_metric_set",
]
