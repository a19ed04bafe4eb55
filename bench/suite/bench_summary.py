"""Pure helpers of the benchmark driver (bench/suite/run_all.py): statistics, deadlines, ncu launch attribution,
and `agent run --json` event parsing (the markdown tables built from them: bench_tables.py).

No GPU, no clock, no files: everything here is tested on the CPU (tests/test_bench.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

DURATION = "gpu__time_duration.sum"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
GRID = "launch__grid_size"
MARKER = "bench_marker_kernel"  # the Triton kernel bench_parts launches before each item inside the NVTX range

# Targets of issue 10 (the tables say met / missed against these).
TARGET_DRAM_PCT = 90.0
TARGET_READ_ONCE_X = 1.1
TARGET_AGREEMENT_PCT = 5.0
TARGET_SPREAD_PCT = 3.0
TARGET_ITERATION_S = 90.0


# ---------------------------------------------------------------- statistics


def median(values: Iterable[float | None]) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return statistics.median(xs) if xs else None


def agreement_pct(measured: float | None, reference: float | None) -> float | None:
    """Signed difference of `measured` from `reference` in percent of the reference (None if either is missing)."""
    if measured is None or reference is None or reference == 0:
        return None
    return 100.0 * (measured - reference) / reference


def repeat_spread_pct(values: Sequence[float | None]) -> float | None:
    """(max - min) / median of repeated measurements, in percent: how far repeats of the same timing drift."""
    xs = [float(v) for v in values if v is not None]
    if len(xs) < 2:
        return None
    med = statistics.median(xs)
    return 100.0 * (max(xs) - min(xs)) / med if med > 0 else None


def met(value: float | None, target: float, *, at_most: bool = True, points: bool = False) -> str:
    """'met' / 'missed by ...' / '—' for a figure against a target (at_most: value <= target is good).
    points: the figure is itself a percentage, so the miss is said in percentage points, else relative."""
    if value is None:
        return "—"
    ok = value <= target if at_most else value >= target
    if ok:
        return "met"
    if points:
        return f"missed by {abs(value - target):.1f} points"
    gap = abs(value - target) / abs(target) * 100 if target else float("inf")
    return f"missed by {gap:.1f} %"


# ---------------------------------------------------------------- deadlines


def part_timeout(planned: float | None, banked: float, remaining: float, reserve: float) -> float:
    """Seconds a part may run: its planned budget plus what earlier parts left unused, never eating into the
    minimum budgets reserved for the parts after it. planned None: everything left (the last part)."""
    cap = remaining - reserve
    if planned is None:
        return max(0.0, cap)
    return max(0.0, min(planned + max(0.0, banked), cap))


# ---------------------------------------------------------------- ncu launches


def split_by_markers(launches: Sequence[tuple[str, dict[str, Any]]], items: Sequence[str],
                     marker: str = MARKER) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Launches (name, metrics) in launch order -> {item: its launches}: each marker launch opens the next item.

    Launches before the first marker are dropped (there should be none); a count of markers other than
    len(items) is an error: the attribution would be wrong.
    """
    segments: list[list[tuple[str, dict[str, Any]]]] = []
    for name, values in launches:
        if name == marker:
            segments.append([])
        elif segments:
            segments[-1].append((name, values))
    if len(segments) != len(items):
        raise ValueError(f"found {len(segments)} marker launches for {len(items)} items")
    return dict(zip(items, segments))


def kernel_rows(launches: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per-launch summary: name, µs, DRAM %, grid."""
    rows = []
    for name, v in launches:
        d = v.get(DURATION)
        rows.append({"name": name, "us": float(d) / 1e3 if isinstance(d, (int, float)) else None,
                     "dram_pct": v.get(DRAM), "grid": v.get(GRID)})
    return rows


def summarize_launches(launches: Sequence[tuple[str, dict[str, Any]]], own: Sequence[str] = ()) -> dict[str, Any]:
    """Sum of durations (ms), duration-weighted DRAM %, and the same for the kernels named in `own` (a
    candidate's own Triton kernels: its GAP kernel) — the rest of a candidate's forward is PyTorch's conv."""
    def total_ms(ls: Sequence[tuple[str, dict[str, Any]]]) -> float | None:
        ds = [v.get(DURATION) for _, v in ls]
        ds = [float(d) for d in ds if isinstance(d, (int, float))]
        return sum(ds) / 1e6 if ds else None

    def weighted_dram(ls: Sequence[tuple[str, dict[str, Any]]]) -> float | None:
        pairs = [(float(v[DRAM]), float(v[DURATION])) for _, v in ls
                 if isinstance(v.get(DRAM), (int, float)) and isinstance(v.get(DURATION), (int, float))]
        w = sum(d for _, d in pairs)
        return sum(p * d for p, d in pairs) / w if w > 0 else None

    mine = [x for x in launches if x[0] in set(own)]
    return {
        "kernels": len(launches), "sum_ms": total_ms(launches), "dram_pct_weighted": weighted_dram(launches),
        "own_kernels": len(mine), "own_us": (total_ms(mine) or 0) * 1e3 if mine else None,
        "own_dram_pct": weighted_dram(mine), "launches": kernel_rows(launches),
    }


# ---------------------------------------------------------------- agent run events


def _t(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["time"])


def iteration_phases(events: Sequence[dict[str, Any]], end: datetime | None = None) -> list[dict[str, Any]]:
    """Per iteration of an `agent run --json` event stream, the seconds spent where the events show it:

    propose_s   iteration event -> usage event (rendering the prompt and proposing; none for iteration 0)
    evaluate_s  -> the first candidate event (evaluate_many over all K: shared reference/baseline + workers)
    profile_s   sum over new bests of candidate event -> best event (ncu on the new best)
    wall_s      iteration event -> next iteration event (or `end`, e.g. when the run finished)
    """
    its: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    last_cand_t: datetime | None = None
    for e in events:
        kind = e.get("event")
        if kind == "iteration":
            if cur is not None:
                cur["_end"] = _t(e)
            cur = {"iteration": e.get("iteration"), "stage": e.get("stage"), "reason": e.get("reason", ""),
                   "_start": _t(e), "_usage": None, "_first": None, "profile_s": 0.0, "candidates": 0, "bests": 0}
            its.append(cur)
            last_cand_t = None
        elif cur is None:
            continue
        elif kind == "usage" and cur["_usage"] is None and cur["_first"] is None:
            cur["_usage"] = _t(e)
        elif kind == "candidate":
            cur["candidates"] += 1
            last_cand_t = _t(e)
            cur["_first"] = cur["_first"] or last_cand_t
        elif kind == "best" and last_cand_t is not None:
            cur["profile_s"] += (_t(e) - last_cand_t).total_seconds()
            cur["bests"] += 1
    out = []
    for i, it in enumerate(its):
        start, usage, first = it.pop("_start"), it.pop("_usage"), it.pop("_first")
        stop = it.pop("_end", None) or (end if i == len(its) - 1 else None)
        it["started_at"] = start.isoformat()
        it["propose_s"] = (usage - start).total_seconds() if usage else None
        it["evaluate_s"] = (first - (usage or start)).total_seconds() if first else None
        it["wall_s"] = (stop - start).total_seconds() if stop else None
        it["complete"] = stop is not None and first is not None
        out.append(it)
    return out
