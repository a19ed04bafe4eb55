"""Reading a `.ncu-rep` into a Profile: NVIDIA's ncu_report module (or the `ncu --csv` fallback), aliases,
aggregation of launches, and early, one-line failures on truncated or foreign files."""

from __future__ import annotations

import logging
import re
import struct
from pathlib import Path
from typing import Literal

from agent.errors import UserError
from agent.ncu.analysis import classify
from agent.ncu.launches import (
    _Launch,
    _resolve_aliases,
    _sm_count,
    _wanted_names,
    aggregate,
)
from agent.ncu.metadata import GPU_NAME, meta
from agent.ncu.rawcsv import _read_with_ncu_csv
from agent.schema import Number, Profile, RuleResult

log = logging.getLogger(__name__)

_MAGIC = b"NVR\x00"
_CMDLINE_SECTION = "Command line profiler metrics"  # the only section of a `--metrics` report
_RULE_KINDS = {0: "none", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}
# ncu's in-message links, "@section:LaunchStats:Launch Statistics@" and "@url:Profiling Guide:https://...@":
# keep their labels.
_RULE_LINKS = (re.compile(r"@section:[^:@]*:([^@]*)@"), re.compile(r"@url:([^:@]*):[^@]*@"))


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
    wanted = list(metrics) if metrics is not None else list(meta().metrics)
    launches, full, gpu, sms = _read(path, wanted, backend)
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


def read_launches(path: Path, metrics: list[str]) -> list[tuple[str, dict[str, Number | str]]]:
    """Every launch of a report in launch order, unaggregated: (kernel name, the wanted metrics it has)."""
    launches, *_ = _read(Path(path), list(metrics), "auto")
    return [(x.name, dict(x.values)) for x in launches]


def _read(path: Path, wanted: list[str], backend: str) -> tuple[list[_Launch], bool, str, int | None]:
    _check_report_file(path)
    if backend == "auto":
        try:
            import ncu_report  # noqa: F401
        except ImportError:
            log.info("ncu_report is not importable: reading %s with `ncu -i --csv --page raw`", path)
            backend = "csv"
        else:
            backend = "module"
    if backend == "module":
        return _read_with_module(path, wanted)
    return _read_with_ncu_csv(path, wanted)


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
