"""Nsight Compute reports as data: read a `.ncu-rep` into a Profile, diff two profiles, classify the bottleneck.

Pure apart from reading the report: no GPU, no clock. Reports are read with NVIDIA's `ncu_report` module (PyPI
`ncu-report`, works without a GPU or ncu); where it cannot be imported, with `ncu -i REPORT --csv --page raw`.
Metric metadata (labels, units, which way is better, aliases, classification thresholds) lives in
`agent/data/metrics.toml`.

One job per module: `metadata` (metric names and metadata), `launches` (launches and their aggregation), `rawcsv`
(the `ncu --csv` fallback), `report` (reading a report), `analysis` (stage sets, prompt table, diff, classify).
Every name is re-exported here, private helpers included, so `agent.ncu.X` keeps working for all callers.
"""

from agent.ncu.analysis import Direction, MetricDelta, _num, _pairs, classify, diff, prompt_table, stage_metric_set
from agent.ncu.launches import _combine, _dims, _Launch, _resolve_aliases, _sm_count, _wanted_names, aggregate
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
    meta,
    metric_info,
)
from agent.ncu.rawcsv import (
    _BYTE_UNITS,
    _DIMS,
    _ID_COLUMNS,
    _NUMBER,
    _TIME_UNITS,
    _csv_value,
    _read_with_ncu_csv,
    parse_raw_csv,
)
from agent.ncu.report import (
    _CMDLINE_SECTION,
    _MAGIC,
    _RULE_KINDS,
    _RULE_LINKS,
    _check_report_file,
    _read_with_module,
    _rule,
    log,
    read_report,
)

__all__ = [
    "BLOCK", "BLOCK_DIMS", "CLASSIFY_INPUTS", "DRAM", "DURATION", "GPU_NAME", "GRID", "GRID_DIMS", "SM", "SM_COUNT",
    "WARPS", "Direction", "MetricDelta", "MetricInfo", "MetricsMeta", "Thresholds", "aggregate", "classify", "diff",
    "meta", "metric_info", "parse_raw_csv", "prompt_table", "read_report", "stage_metric_set",
]
