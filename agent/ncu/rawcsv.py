"""The fallback reader: `ncu -i REPORT --csv --page raw`, for where the ncu_report module cannot be imported."""

from __future__ import annotations

import csv
import io
import re
import subprocess
from pathlib import Path

from agent.errors import UserError
from agent.ncu.launches import _Launch, _resolve_aliases, _sm_count, _wanted_names
from agent.ncu.locate import find_ncu
from agent.ncu.metadata import BLOCK_DIMS, GPU_NAME, GRID_DIMS
from agent.schema import Number

_TIME_UNITS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
_BYTE_UNITS = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12}
_NUMBER = re.compile(r"-?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?([eE][-+]?\d+)?")
_DIMS = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
# columns of `--page raw` that describe the launch rather than hold a metric
_ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
               "Grid Size", "Device", "CC"}


def _read_with_ncu_csv(path: Path, wanted: list[str]) -> tuple[list[_Launch], bool, str, int | None]:
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
