"""Issue 21 item 4's table: each KernelBench look-alike's offline `--stage auto` best, judged again in a fresh process.

    python bench/suite/kernelbench_tables.py record STEM RUN.jsonl RECHECK.json BEST SHOW.json OUT.json   # one problem
    python bench/suite/kernelbench_tables.py table DIR                                          # the table, from DIR/kb_*.json

`record` keeps what the run said (its stop reason, where its best came from) and the re-check's verdict and timing;
`table` prints BENCHMARKS.md's markdown from those files, never from typed numbers: both clocks against eager and
torch.compile, and the geometric means over the problems that have a correct best.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path


def _events(path: str) -> list[dict]:
    """The run's JSON lines (`agent run --json`), whatever could be read of them."""
    events = []
    for line in Path(path).read_text().splitlines() if Path(path).exists() else []:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def record(stem: str, run_jsonl: str, recheck: str, best: str, show: str) -> dict:
    """One problem's row: the run's stop reason and best, where that best came from (`agent show --json`'s idea:
    "torch.compile's own kernels" for the Inductor start), the fresh re-check."""
    events = _events(run_jsonl)
    summary = next((e for e in reversed(events) if "stop_reason" in e), {})
    candidates = [e for e in events if e.get("event") == "candidate"]
    shown: dict = {}
    if show and Path(show).exists():
        try:
            shown = json.loads(Path(show).read_text())
        except ValueError:
            pass
    row: dict = {"problem": stem, "run": summary.get("run"), "stop_reason": summary.get("stop_reason"),
                 "error": summary.get("error"), "best": best or None, "origin": shown.get("idea"),
                 "stage": shown.get("stage"),
                 "judged": len(candidates), "correct": sum(c.get("verdict") == "correct" for c in candidates),
                 "best_iteration": shown.get("iteration"),
                 "precision": os.environ.get("PRECISION") or "fp32"}  # what kernelbench_goal.sh ran with
    if recheck and Path(recheck).exists():
        try:
            e = json.loads(Path(recheck).read_text())
        except ValueError as err:
            e = {"verdict": "unreadable", "message": str(err)}
        row["recheck"] = {"verdict": e.get("verdict"), "message": e.get("message"), "timing": e.get("timing")}
    return row


def _x(a: float | None, b: float | None) -> float | None:
    return b / a if a and b else None


def table(folder: str) -> str:
    rows = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("kb_*.json"))]
    out = ["| problem | best from | stage | device ms | × eager | × compile | latency ms | × eager | × compile | "
           "compile device ms | compile latency ms | re-check |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    dev_eager, lat_eager, dev_comp, lat_comp, at_least, at_fair = [], [], [], [], 0, 0
    for r in rows:
        rc = r.get("recheck") or {}
        t = rc.get("timing") or {}
        ok = rc.get("verdict") == "correct" and t.get("device_ms")
        if not ok:
            why = rc.get("message") or r.get("error") or r.get("stop_reason") or "no correct best"
            out.append(f"| {r['problem']} | – | – | – | – | – | – | – | – | – | – | {rc.get('verdict', '–')}: "
                       f"{str(why)[:90]} |")
            continue
        d, lt = t["device_ms"], t["latency_ms"]
        de, le, dc, lc = (_x(d, t.get("eager_device_ms")), _x(lt, t.get("eager_latency_ms")),
                          _x(d, t.get("compile_device_ms")), _x(lt, t.get("compile_latency_ms")))
        for acc, v in ((dev_eager, de), (lat_eager, le), (dev_comp, dc), (lat_comp, lc)):
            if v:
                acc.append(v)
        # a tie within the candidate's device spread counts: the same kernels measured twice differ by that much
        at_least += bool(dc and dc >= 1.0 - (t.get("device_spread_pct") or 0.0) / 100)
        f = lambda v: f"{v:.2f}×" if v else "–"  # noqa: E731
        ce, ct = t.get("compile_error"), t.get("compile_tolerance")
        mark = " †" if ce is not None and ct is not None and ce > ct else ""
        fair = t.get("device_speedup_vs_compile_fp32")  # torch.compile with TF32 off, where the default is outside
        fair_lat = t.get("latency_speedup_vs_compile_fp32")
        lmark = mark + (f" ({fair_lat:.2f}× TF32 off)" if fair_lat else "")
        if fair:
            mark += f" ({fair:.2f}× TF32 off)"
            at_fair += fair >= 1.0 - (t.get("device_spread_pct") or 0.0) / 100
        else:
            at_fair += bool(dc and dc >= 1.0 - (t.get("device_spread_pct") or 0.0) / 100)
        stage = r.get("stage") if r.get("precision", "fp32") == "fp32" else f"{r.get('stage')}, --precision {r['precision']}"
        out.append(f"| {r['problem']} | {r.get('origin') or '?'} (i{r.get('best_iteration')}) | {stage} | "
                   f"{d:.4f} | {f(de)} | {f(dc)}{mark} | {lt:.4f} | {f(le)} | {f(lc)}{lmark} | "
                   f"{t.get('compile_device_ms') or 0:.4f} | {t.get('compile_latency_ms') or 0:.4f} | correct |")
    g = lambda xs: f"{math.exp(sum(map(math.log, xs)) / len(xs)):.2f}× over {len(xs)}" if xs else "–"  # noqa: E731
    out += ["", f"Geometric mean over eager: device {g(dev_eager)}, latency {g(lat_eager)}; over torch.compile: "
                f"device {g(dev_comp)}, latency {g(lat_comp)}. At least as fast as torch.compile on the device "
                f"clock (ties within the device spread counted): {at_least} of {len(rows)}; against torch.compile "
                f"with TF32 off where its default output is outside the tolerance: {at_fair} of {len(rows)}.",
            "† torch.compile's own output is outside the tolerance the candidate is held to (its error is measured "
            "beside its time since issue 21's second session; earlier files do not have it)."]
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "record":
        Path(sys.argv[7]).write_text(json.dumps(record(*sys.argv[2:7]), indent=1))
    elif len(sys.argv) == 3 and sys.argv[1] == "table":
        print(table(sys.argv[2]))
    else:
        sys.exit(__doc__)
