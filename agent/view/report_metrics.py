"""What changed in a new best's ncu metrics, as the report shows it: each metric by a name a GPU engineer reads
(metrics.toml's label, else one made from ncu's naming scheme), its values in their units (ns as µs or ms, bytes as
MB, clocks as GHz), and the metrics that moved most picked out; the rest go into a folded table."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from agent.diagnosis import model as dm
from agent.ncu import DRAM, DURATION, SM, MetricDelta, metric_info

TOP = 8  # metrics shown unfolded for each new best: enough for the story, short enough to read at a glance
# What decides a kernel's time, first whenever it moved: its duration and its speed-of-light throughputs.
_FIRST = (DURATION, DRAM, SM, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", dm.L2)

# Metrics metrics.toml does not list (the diagnosis's full-set counters): (name, unit).
_NAMES: dict[str, tuple[str, str]] = {
    dm.SPILLS: ("register-spill instructions", "instructions"),
    dm.GLOBAL_LD_BYTES_PER_SECTOR: ("bytes used per global-load sector", "B of 32"),
    dm.GLOBAL_ST_BYTES_PER_SECTOR: ("bytes used per global-store sector", "B of 32"),
    dm.GLOBAL_LD_SECTORS: ("global-load sectors", "sectors"),
    dm.GLOBAL_ST_SECTORS: ("global-store sectors", "sectors"),
    dm.SHARED_CONFLICTS: ("shared-memory bank conflicts", "conflicts"),
    dm.SHARED_WAVEFRONTS: ("shared-memory wavefronts", "wavefronts"),
    dm.SM_ACTIVE_AVG: ("SM active cycles (mean SM)", "cycles"),
    dm.SM_ACTIVE_MAX: ("SM active cycles (busiest SM)", "cycles"),
    dm.SHARED_PER_BLOCK: ("shared memory per block", "bytes"),
    dm.SM_CLOCK: ("SM clock", "Hz"),
    dm.DRAM_CLOCK: ("DRAM clock", "Hz"),
    dm.DRAM_PEAK_PER_CYCLE: ("DRAM peak", "bytes/cycle"),
    dm.L2: ("L2 throughput", "%"),
}
_PATTERNS: list[tuple[re.Pattern[str], str, str]] = [  # (ncu name, label with {0} for the captured word, unit)
    (re.compile(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio"), "stall: {0}", "cycles/issue"),
    (re.compile(r"smsp__sass_thread_inst_executed_op_(\w+?)_pred_on\.sum\.per_cycle_elapsed"), "{0} rate",
     "thread instr/cycle"),
    (re.compile(r"sm__sass_thread_inst_executed_op_(\w+?)_pred_on\.sum\.peak_sustained"), "{0} peak rate",
     "thread instr/cycle"),
    (re.compile(r"launch__occupancy_limit_(\w+)"), "occupancy limit: {0}", "blocks/SM"),
]
_COUNTS = {"blocks", "threads", "registers", "instructions", "warp instructions", "sectors", "conflicts",
           "wavefronts", "cycles"}


@dataclass
class Named:
    label: str
    unit: str


def named(metric: str) -> Named:
    """A metric's human name and unit: metrics.toml's, else from ncu's naming scheme, else the raw name."""
    info = metric_info(metric)
    if info.label != metric:
        return Named(info.label, info.unit)
    if metric in _NAMES:
        return Named(*_NAMES[metric])
    for pattern, label, unit in _PATTERNS:
        m = pattern.fullmatch(metric)
        if m:
            word = m.group(1).replace("_", " ")
            return Named(label.format(word.upper() if len(word) <= 4 and "rate" in label else word), unit)
    unit = "%" if "pct" in metric else "bytes" if "bytes" in metric else "ns" if "time_duration" in metric else ""
    return Named(metric, unit)


def value_text(v: float | int | None, unit: str) -> str:
    """A value in its unit, scaled for reading: '685.8 µs', '536.9 MB', '1.60 GHz', '23.5 %', '16.8 M sectors'."""
    if v is None:
        return "–"
    x = float(v)
    if unit == "ns":
        return _scaled(x, ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1, "ns")))
    if unit == "bytes":
        return _scaled(x, ((1e9, "GB"), (1e6, "MB"), (1e3, "KB"), (1, "B")))
    if unit == "Hz":
        return _scaled(x, ((1e9, "GHz"), (1e6, "MHz"), (1, "Hz")))
    if unit == "%":
        return f"{x:.1f} %"
    if unit in _COUNTS:
        body = f"{x:,.0f}" if abs(x) < 1e5 and x.is_integer() else _scaled(x, ((1e9, "G"), (1e6, "M"), (1e3, "k"),
                                                                             (1, "")))
        return f"{body} {unit}".replace("  ", " ")
    body = f"{int(x):,}" if x.is_integer() else f"{x:.4g}"
    return f"{body} {unit}" if unit else body


def _scaled(x: float, steps: tuple[tuple[float, str], ...]) -> str:
    for size, name in steps:
        if abs(x) >= size or size == steps[-1][0]:
            y = x / size
            text = f"{y:.4g}" if abs(y) < 1000 else f"{y:,.0f}"
            return f"{text} {name}".rstrip()
    return f"{x:g}"  # unreachable: the last step always matches


def change_text(d: MetricDelta, unit: str) -> str:
    """'-73.5 %'; a large move as a factor, '×3.77'; a percentage metric in points, '+65.1 pts'."""
    if d.before is None or d.after is None:
        return ""
    if unit == "%":
        return f"{float(d.after) - float(d.before):+.1f} pts"
    if d.pct is None:
        return "from 0"
    if abs(d.pct) >= 100 and float(d.before) > 0 and float(d.after) > 0:
        return f"×{float(d.after) / float(d.before):.3g}"
    return f"{d.pct:+.1f} %"


def _moved(d: MetricDelta, unit: str) -> float:
    """How far a metric moved, for ranking: the log of its ratio; nil below what a reader would call a change (a
    percentage that moved under a point, a stall under half a cycle per issue)."""
    a, b = float(d.before or 0), float(d.after or 0)
    if unit == "%" and abs(b - a) < 1.0:
        return 0.0
    if unit == "cycles/issue" and max(abs(a), abs(b)) < 0.5:
        return 0.0
    if a > 0 and b > 0:
        return abs(math.log(b / a))
    return 0.0 if a == b else 10.0  # from or to zero: a spill gone, a conflict born


def metric_rows(deltas: list[MetricDelta]) -> tuple[list[dict[str, str]], list[dict[str, str]], str]:
    """(the metrics that moved most, the rest, a note counting them): duration and the speed-of-light throughputs
    first, then the metrics with a better direction, then configuration (grid, registers), each by how far it moved;
    the rest also holds those within noise and those in one profile only."""
    compared = [d for d in deltas if d.before is not None and d.after is not None]
    moved = [d for d in compared if d.direction != "same"]

    def rank(d: MetricDelta) -> tuple[int, int, float]:
        first = _FIRST.index(d.metric) if d.metric in _FIRST else len(_FIRST)
        return first, d.direction == "neutral", -_moved(d, named(d.metric).unit)

    ranked = sorted(moved, key=rank)
    top = [d for d in ranked if d.metric == DURATION or _moved(d, named(d.metric).unit) > 0][:TOP]
    rest = [d for d in ranked if d not in top] + [d for d in compared if d.direction == "same"] + \
        [d for d in deltas if d.before is None or d.after is None]
    note = f"{len(moved)} of {len(compared)} compared metrics changed beyond noise"
    if len(deltas) > len(compared):
        note += f"; {len(deltas) - len(compared)} in one profile only"
    return [_row(d) for d in top], [_row(d) for d in rest], note


def _row(d: MetricDelta) -> dict[str, str]:
    n = named(d.metric)
    return {"kernel": d.kernel, "metric": n.label, "name": d.metric, "unit": n.unit,
            "before": value_text(d.before, n.unit), "after": value_text(d.after, n.unit),
            "change": change_text(d, n.unit), "direction": d.direction}
