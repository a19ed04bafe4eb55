"""Nsight Compute reports as data: read a `.ncu-rep` into a Profile, diff two profiles, classify the bottleneck.

Pure apart from reading the report: no GPU, no clock. Reports are read with NVIDIA's `ncu_report` module (PyPI
`ncu-report`, works without a GPU or ncu); where it cannot be imported, with `ncu -i REPORT --csv --page raw`.
Metric metadata (labels, units, which way is better, aliases, classification thresholds) lives in
`agent/data/metrics.toml`.
"""

from __future__ import annotations

import csv
import io
import logging
import re
import struct
import subprocess
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agent.errors import UserError
from agent.schema import Bottleneck, GPUSpec, KernelProfile, MetricTable, Number, Profile, RuleResult, Stage

log = logging.getLogger(__name__)

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

_MAGIC = b"NVR\x00"
_CMDLINE_SECTION = "Command line profiler metrics"  # the only section of a `--metrics` report
_RULE_KINDS = {0: "none", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}
# ncu's in-message links, "@section:LaunchStats:Launch Statistics@" and "@url:Profiling Guide:https://...@":
# keep their labels.
_RULE_LINKS = (re.compile(r"@section:[^:@]*:([^@]*)@"), re.compile(r"@url:([^:@]*):[^@]*@"))

Direction = Literal["better", "worse", "same", "neutral"]


# ---------------------------------------------------------------- metadata (agent/data/metrics.toml)


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
    same_pct: float


class MetricsMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metrics: dict[str, MetricInfo]
    aliases: dict[str, list[str]]
    bottleneck: Thresholds


@lru_cache(maxsize=1)
def meta() -> MetricsMeta:
    """The metric metadata file, parsed once."""
    with open(Path(__file__).parent / "data" / "metrics.toml", "rb") as f:
        return MetricsMeta.model_validate(tomllib.load(f))


def metric_info(name: str) -> MetricInfo:
    """Label, unit and direction of a metric (a neutral placeholder for metrics the file doesn't list)."""
    return meta().metrics.get(name) or MetricInfo(label=name)


def stage_metric_set(stage: Stage) -> list[str]:
    """The metrics `ncu --metrics` collects for a stage: its prompt metrics, then the duration, the launch size
    and whatever else classify() needs that the stage doesn't already ask for (in that order, no repeats)."""
    names = list(stage.metrics)
    for extra in (DURATION, GRID, BLOCK, DRAM, SM, WARPS):
        if extra not in names:
            names.append(extra)
    return names


# ---------------------------------------------------------------- reading reports


@dataclass
class _Launch:
    """One kernel launch as a report holds it (before launches of the same name are aggregated)."""

    name: str
    values: dict[str, Number | str] = field(default_factory=dict)
    rules: list[RuleResult] = field(default_factory=list)

    @property
    def duration(self) -> float:
        v = self.values.get(DURATION)
        return float(v) if isinstance(v, (int, float)) else 0.0


def read_report(
    path: Path, metrics: list[str] | None = None, *, backend: Literal["auto", "module", "csv"] = "auto"
) -> Profile:
    """Read a `.ncu-rep` into a Profile: one KernelProfile per kernel name, in the order they first ran.

    `metrics`: the names to keep per kernel (e.g. `stage_metric_set(stage)`); a name the report lacks is looked
    up under its aliases (metrics.toml) and kept under the asked-for name; names found nowhere are left out.
    None keeps every metric metrics.toml describes that the report has.

    Several launches of one kernel name are aggregated, and `launches` says how many there were:
    - `launch__*` / `device__*` metrics, strings, grid and block, and the rule results: from the longest launch
      (by gpu__time_duration.sum), the one that matters most;
    - additive counters (names ending in `.sum`, e.g. the duration or bytes read): summed, so the duration is
      the kernel's total GPU time;
    - names ending in `.max` / `.min`: the max / min over launches;
    - everything else (percentages, ratios, rates, averages): the mean weighted by each launch's duration.

    The GPU name comes from device__attribute_display_name; `metric_set` is "full" when the report holds ncu's
    sections (and rules), "stage" for a plain `--metrics` report; `bottleneck` is classify()'s verdict.
    Unreadable, truncated or empty reports raise UserError.
    """
    path = Path(path)
    _check_report_file(path)
    wanted = list(metrics) if metrics is not None else list(meta().metrics)
    if backend == "auto":
        try:
            import ncu_report  # noqa: F401
        except ImportError:
            log.info("ncu_report is not importable: reading %s with `ncu -i --csv --page raw`", path)
            backend = "csv"
        else:
            backend = "module"
    if backend == "module":
        launches, full, gpu, sms = _read_with_module(path, wanted)
    else:
        launches, full, gpu, sms = _read_with_ncu_csv(path, wanted)
    if not launches:
        raise UserError(f"{path}: the report holds no kernels (empty, truncated, or every kernel was filtered out)")
    profile = aggregate(launches, wanted)
    profile.report, profile.metric_set, profile.gpu = path, ("full" if full else "stage"), gpu
    # classify on everything read (the stage's list may lack some inputs), then keep only what was asked for
    profile.bottleneck = classify(profile, sms=sms)
    keep = set(wanted)
    for k in profile.kernels.values():
        k.metrics = {m: v for m, v in k.metrics.items() if m in keep}
    return profile


def _check_report_file(path: Path) -> None:
    """Fail early, in one line, on what ncu_report would read as an empty report.

    A report is the magic b"NVR\\0" then blocks of [u32 little-endian length][payload] up to the end of the file
    (as written by ncu 2025.x). A cut-off file ends inside a block: its last length points past the end.
    """
    if not path.exists():
        raise UserError(f"no such report: {path}")
    if not path.is_file():
        raise UserError(f"not a report file: {path}")
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(0)
            if f.read(len(_MAGIC)) != _MAGIC:
                raise UserError(f"{path} is not an Nsight Compute report (.ncu-rep)")
            offset = len(_MAGIC)
            while offset + 4 <= size:  # walk the block lengths without reading the payloads
                f.seek(offset)
                (length,) = struct.unpack("<I", f.read(4))
                offset += 4 + length
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}") from e
    if offset != size:
        raise UserError(f"{path} is truncated ({size} bytes; its last block needs {offset - size} more)",
                        hint="profile again; was ncu stopped while writing it?")


def _wanted_names(wanted: list[str]) -> list[str]:
    """What to read from a launch: the asked-for names, their aliases, and what aggregation and classify need."""
    names = dict.fromkeys([*wanted, *CLASSIFY_INPUTS, BLOCK, GPU_NAME, *SM_COUNT, *GRID_DIMS, *BLOCK_DIMS])
    for name in list(names):
        for alias in meta().aliases.get(name, []):
            names.setdefault(alias, None)
    return list(names)


def _resolve_aliases(values: dict[str, Number | str]) -> None:
    """Fill a missing name from the first alias present (in place)."""
    for name, aliases in meta().aliases.items():
        if name not in values:
            for alias in aliases:
                if alias in values:
                    values[name] = values[alias]
                    break


def _read_with_module(path: Path, wanted: list[str]) -> tuple[list[_Launch], bool, str, int | None]:
    import ncu_report

    try:
        ctx = ncu_report.load_report(str(path))
    except Exception as e:  # the module raises plain exceptions with a sentence; keep it one line
        raise UserError(f"cannot read {path}: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}") from e
    names = _wanted_names(wanted)
    launches: list[_Launch] = []
    full, gpu, sms = False, "", None
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for i in range(rng.num_actions()):
            action = rng.action_by_idx(i)
            name = action.name()
            if not name:  # a partly written action: ncu_report gives it no name and no metrics
                raise UserError(f"{path} is truncated or damaged (a kernel record without a name)")
            values: dict[str, Number | str] = {}
            for n in names:
                m = action.metric_by_name(n)
                if m is not None and m.has_value():
                    values[n] = m.value()
            _resolve_aliases(values)
            sections = [s.name() for s in action.sections()]
            full = full or any(s != _CMDLINE_SECTION for s in sections)
            rules = [_rule(d) for d in action.rule_results_as_dicts()]
            launches.append(_Launch(name=name, values=values, rules=[x for x in rules if x is not None]))
            gpu = gpu or str(values.get(GPU_NAME, ""))
            sms = sms or _sm_count(values)
    return launches, full, gpu, sms


def _rule(d: dict) -> RuleResult | None:
    msg = d.get("rule_message") or {}
    text = str(msg.get("message", ""))
    for link in _RULE_LINKS:
        text = link.sub(r"\1", text)
    text = text.strip()
    if not text:
        return None
    speedup = (d.get("speedup_estimation") or {}).get("speedup")
    return RuleResult(
        rule=str(d.get("rule_identifier", "")),
        title=str(msg.get("title") or d.get("name") or ""),
        kind=_RULE_KINDS.get(int(msg.get("type", 0)), str(msg.get("type", ""))),
        message=" ".join(text.split()),
        estimated_speedup_pct=float(speedup) if speedup is not None else None,
    )


def _sm_count(values: dict[str, Number | str]) -> int | None:
    for n in SM_COUNT:
        v = values.get(n)
        if isinstance(v, (int, float)) and v > 0:
            return int(v)
    return None


# ---------------------------------------------------------------- the CSV fallback


_TIME_UNITS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
_BYTE_UNITS = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12}
_NUMBER = re.compile(r"-?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?([eE][-+]?\d+)?")
_DIMS = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
# columns of `--page raw` that describe the launch rather than hold a metric
_ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
               "Grid Size", "Device", "CC"}


def _read_with_ncu_csv(path: Path, wanted: list[str]) -> tuple[list[_Launch], bool, str, int | None]:
    from agent.profiler import find_ncu

    ncu = find_ncu()
    if ncu is None:
        raise UserError(f"cannot read {path}: the ncu_report module is not installed and ncu is not on PATH",
                        hint="pip install ncu-report")
    cmd = [str(ncu), "-i", str(path), "--csv", "--page", "raw", "--print-units", "base", "--print-kernel-base", "function"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"cannot read {path} with ncu: {e}") from e
    if out.returncode != 0:
        err = next((ln for ln in (out.stderr + out.stdout).splitlines() if "ERROR" in ln), out.stderr.strip()[:200])
        raise UserError(f"cannot read {path} with ncu: {err.strip() or f'exit status {out.returncode}'}")
    return parse_raw_csv(out.stdout, wanted)


def parse_raw_csv(text: str, wanted: list[str] | None = None) -> tuple[list[_Launch], bool, str, int | None]:
    """Parse what `ncu -i REPORT --csv --page raw` prints: a header row (launch columns, then metric names), a
    units row, then one row per launch. Returns (launches, full, gpu name, SM count); times become ns and byte
    counts bytes, as ncu_report gives them. The raw page has no rule results: a full report read this way has
    its metrics but no rules (`full` is True when it has more metrics than a stage set could)."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("==")]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if start is None:
        raise UserError("ncu printed no CSV table (no header row starting with \"ID\")")
    header, body = rows[start], rows[start + 1 :]
    units = [""] * len(header)
    if body and body[0] and body[0][0] == "":
        units, body = body[0], body[1:]
    keep = None if wanted is None else set(_wanted_names(wanted))
    launches: list[_Launch] = []
    gpu, sms = "", None
    for row in body:
        if len(row) != len(header):
            continue
        cells = dict(zip(header, row))
        values: dict[str, Number | str] = {}
        for col, unit, cell in zip(header, units, row):
            if col in _ID_COLUMNS or (keep is not None and col not in keep):
                continue
            v = _csv_value(cell, unit)
            if v is not None:
                values[col] = v
        for dims_col, names in (("Grid Size", GRID_DIMS), ("Block Size", BLOCK_DIMS)):
            m = _DIMS.fullmatch(cells.get(dims_col, "").strip())
            if m and not all(n in values for n in names):
                values.update({n: int(x) for n, x in zip(names, m.groups())})
        _resolve_aliases(values)
        launches.append(_Launch(name=cells.get("Kernel Name", "?"), values=values))
        gpu = gpu or str(values.get(GPU_NAME, ""))
        sms = sms or _sm_count(values)
    full = len(header) - len(_ID_COLUMNS) > 1000  # a full set has ~2,000 metrics, a stage set ~300 with launch stats
    return launches, full, gpu, sms


def _csv_value(cell: str, unit: str) -> Number | str | None:
    cell = cell.strip()
    if not cell or cell.lower() in {"n/a", "nan"}:
        return None
    if not _NUMBER.fullmatch(cell):
        return cell
    plain = cell.replace(",", "")
    value: Number = float(plain) if any(c in plain for c in ".eE") else int(plain)
    scale = _TIME_UNITS.get(unit) or _BYTE_UNITS.get(unit) or 1.0
    if scale != 1.0:
        value = float(value) * scale
    return value


# ---------------------------------------------------------------- aggregating launches


def _combine(name: str, launches: list[_Launch]) -> Number | str | None:
    present = [x for x in launches if name in x.values]
    if not present:
        return None
    longest = max(present, key=lambda x: x.duration)
    first = longest.values[name]
    if name.startswith(("launch__", "device__")) or isinstance(first, str) or len(present) == 1:
        return first
    nums = [x.values[name] for x in present if isinstance(x.values[name], (int, float))]
    if len(nums) != len(present):
        return first
    if name.endswith(".sum"):
        return sum(nums)  # type: ignore[arg-type]
    if name.endswith(".max"):
        return max(nums)  # type: ignore[type-var]
    if name.endswith(".min"):
        return min(nums)  # type: ignore[type-var]
    weights = [x.duration for x in present]
    if sum(weights) <= 0:
        weights = [1.0] * len(present)
    return sum(float(v) * w for v, w in zip(nums, weights)) / sum(weights)


def _dims(values: dict[str, Number | str], names: tuple[str, ...]) -> list[int] | None:
    dims = [values.get(n) for n in names]
    return [int(d) for d in dims] if all(isinstance(d, (int, float)) for d in dims) else None  # type: ignore[arg-type]


def aggregate(launches: list[_Launch], wanted: list[str]) -> Profile:
    """Group launches by kernel name (first-run order) and aggregate them as read_report describes."""
    groups: dict[str, list[_Launch]] = {}
    for launch in launches:
        groups.setdefault(launch.name, []).append(launch)
    kernels: dict[str, KernelProfile] = {}
    for name, group in groups.items():
        longest = max(group, key=lambda x: x.duration)
        values: dict[str, Number] = {}
        for metric in dict.fromkeys([*wanted, *CLASSIFY_INPUTS, *SM_COUNT]):
            v = _combine(metric, group)
            if isinstance(v, (int, float)):
                values[metric] = v
        kernels[name] = KernelProfile(
            name=name, launches=len(group), grid=_dims(longest.values, GRID_DIMS),
            block=_dims(longest.values, BLOCK_DIMS), metrics=values, rules=longest.rules,
        )
    return Profile(kernels=kernels)


def prompt_table(profile: Profile, stage: Stage) -> MetricTable:
    """The [NCU PROFILING METRICS] table for a stage: per kernel, the stage's metrics in the stage's order."""
    return {
        name: {m: k.metrics[m] for m in stage.metrics if m in k.metrics} for name, k in profile.kernels.items()
    }


# ---------------------------------------------------------------- diff


class MetricDelta(BaseModel):
    """One metric of one kernel, before and after: `direction` says whether the change is for the better."""

    model_config = ConfigDict(extra="forbid")
    kernel: str
    metric: str
    before: Number | None
    after: Number | None
    delta: float | None
    pct: float | None
    direction: Direction


def _pairs(a: Profile, b: Profile) -> list[tuple[str, KernelProfile | None, KernelProfile | None]]:
    """Kernels paired by name; those left over on both sides paired in order (a renamed kernel still diffs)."""
    pairs: list[tuple[str, KernelProfile | None, KernelProfile | None]] = []
    for name, ka in a.kernels.items():
        if name in b.kernels:
            pairs.append((name, ka, b.kernels[name]))
    left_a = [k for n, k in a.kernels.items() if n not in b.kernels]
    left_b = [k for n, k in b.kernels.items() if n not in a.kernels]
    for ka, kb in zip(left_a, left_b):
        pairs.append((f"{ka.name} → {kb.name}", ka, kb))
    n = min(len(left_a), len(left_b))
    pairs += [(k.name, k, None) for k in left_a[n:]] + [(k.name, None, k) for k in left_b[n:]]
    return pairs


def diff(a: Profile, b: Profile) -> list[MetricDelta]:
    """Per kernel and metric, before (a) and after (b): delta, percent change and whether it is better.

    Kernels pair by name; kernels found on one side only pair up in order (so a candidate that renamed its one
    kernel still diffs against its parent). A metric on one side only has None for the other. "same" means a
    change under metrics.toml's same_pct; "neutral" a change in a metric with no better direction.
    """
    same_pct = meta().bottleneck.same_pct
    out: list[MetricDelta] = []
    for label, ka, kb in _pairs(a, b):
        ma, mb = (ka.metrics if ka else {}), (kb.metrics if kb else {})
        for metric in dict.fromkeys([*ma, *mb]):
            before, after = ma.get(metric), mb.get(metric)
            if before is None or after is None:
                out.append(MetricDelta(kernel=label, metric=metric, before=before, after=after, delta=None,
                                       pct=None, direction="neutral"))
                continue
            delta = float(after) - float(before)
            pct = delta / abs(before) * 100 if before else (0.0 if delta == 0 else None)
            if (pct is not None and abs(pct) < same_pct) or delta == 0:
                direction: Direction = "same"
            else:
                way = metric_info(metric).direction
                if way == "neutral":
                    direction = "neutral"
                else:
                    direction = "better" if (delta > 0) == (way == "higher") else "worse"
            out.append(MetricDelta(kernel=label, metric=metric, before=before, after=after, delta=delta, pct=pct,
                                   direction=direction))
    return out


# ---------------------------------------------------------------- classify


def _num(metrics: dict[str, Number], name: str) -> float | None:
    v = metrics.get(name)
    return float(v) if isinstance(v, (int, float)) else None


def classify(profile_or_kernel: Profile | KernelProfile, gpu: GPUSpec | None = None, *, sms: int | None = None) -> Bottleneck:
    """Memory-, compute-, latency- or launch-bound, with the figures that led to it.

    A Profile is judged by its kernel with the most GPU time. Rules, in order (thresholds in metrics.toml):
    launch-bound when one launch runs under `launch_us`; memory- / compute-bound when DRAM / SM throughput
    reaches `bound_pct` of peak (the higher one names it); otherwise latency-bound (ncu's SpeedOfLight rule:
    neither throughput near peak means latency is the limit), with the reasons it shows (a grid smaller than
    the SM count, few warps active). The SM count comes from `gpu`, else `sms`, else the report's own
    launch__sm_count when the kernel's metrics hold it.
    """
    t = meta().bottleneck
    if isinstance(profile_or_kernel, Profile):
        if not profile_or_kernel.kernels:
            return Bottleneck(kind="unknown", reason="no kernels profiled")
        kernel = max(profile_or_kernel.kernels.values(), key=lambda k: _num(k.metrics, DURATION) or 0.0)
        prefix = f"{kernel.name}: " if len(profile_or_kernel.kernels) > 1 else ""
    else:
        kernel, prefix = profile_or_kernel, ""
    m = kernel.metrics
    n_sms = gpu.sms if gpu else sms or next((int(v) for n in SM_COUNT if (v := _num(m, n))), None)
    dur, dram, sm, warps, grid = (_num(m, n) for n in (DURATION, DRAM, SM, WARPS, GRID))
    figures = {k: v for k, v in {
        "duration_us": dur / 1e3 if dur is not None else None, "launches": float(kernel.launches),
        "dram_pct": dram, "sm_pct": sm, "warps_active_pct": warps, "grid": grid,
        "sms": float(n_sms) if n_sms else None,
    }.items() if v is not None}

    parts = []
    if grid is not None:
        parts.append(f"grid {grid:g} blocks" + (f" on {n_sms} SMs" if n_sms else ""))
    if dram is not None:
        parts.append(f"DRAM {dram:.1f} %")
    if sm is not None:
        parts.append(f"SM {sm:.1f} %")
    if warps is not None:
        parts.append(f"warps active {warps:.1f} %")
    details = ", ".join(parts)

    per_launch_us = dur / 1e3 / max(kernel.launches, 1) if dur is not None else None
    if per_launch_us is not None and per_launch_us < t.launch_us:
        kind = "launch-bound"
        reason = f"{per_launch_us:.1f} µs per launch (< {t.launch_us:g} µs: launch overhead dominates)"
        reason += f", {details}" if details else ""
    elif dram is None and sm is None:
        return Bottleneck(kind="unknown", reason=prefix + "unknown: the profile has neither DRAM nor SM throughput",
                          figures=figures)
    elif max(dram or 0.0, sm or 0.0) >= t.bound_pct:
        kind = "memory-bound" if (dram or 0.0) >= (sm or 0.0) else "compute-bound"
        reason = details
    else:
        kind = "latency-bound"
        why = [f"neither DRAM nor SM throughput reaches {t.bound_pct:g} %"]
        if grid is not None and n_sms and grid < n_sms:
            why.append("fewer blocks than SMs")
        if warps is not None and warps < t.low_warps_pct:
            why.append(f"under {t.low_warps_pct:g} % of warp slots active")
        reason = f"{details} ({'; '.join(why)})"
    return Bottleneck(kind=kind, reason=f"{prefix}{kind}: {reason}", figures=figures)
