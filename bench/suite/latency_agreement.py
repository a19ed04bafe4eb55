"""GPU check (issue 15, done-when 1): the harness's two clocks against a plain script's, over several processes.

A host-bound call's latency drifts within a process and between processes (bench/diag/latency_processes.py: 0.09 to
0.18 ms for the algebraic rewrite), so one process against one process compares two draws. This runs the plain
timing (code of its own, bench/suite/clocks.plain_clocks: events around back-to-back calls after a reading
flush; synchronized calls from an idle GPU spread over about a second) in PLAIN fresh processes, and `agent eval
--json` of the same file HARNESS times (after one cold evaluation that fills the cache), then compares the medians
across processes, candidate and eager on both clocks (torch.compile in the first plain process).
Writes $OUT/gpu_latency_agreement.json; prints a summary.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "suite"))
OUT = Path(os.environ.get("OUT", "."))
PLAIN, HARNESS = 10, 9


def child(with_compile: bool) -> dict:
    from clocks import plain

    return plain(with_compile)


def main() -> int:
    if sys.argv[1:2] == ["child"]:
        print(json.dumps(child(sys.argv[2:] == ["compile"])))
        return 0
    from clocks import ALGEBRAIC, agent_eval

    report: dict = {"plain": [], "harness": []}
    dest = OUT / "gpu_latency_agreement.json"
    for i in range(PLAIN):
        p = subprocess.run([sys.executable, __file__, "child", *(["compile"] if i == 0 else [])], capture_output=True,
                           text=True, timeout=300, cwd=REPO)
        try:
            report["plain"].append(json.loads(p.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            report["plain"].append({"error": p.stderr[-800:]})
        print("plain", json.dumps(report["plain"][-1]), flush=True)
        dest.write_text(json.dumps(report, indent=1))
    cache = Path(tempfile.mkdtemp(prefix="agent-agree-cache-", dir="/opt" if os.access("/opt", os.W_OK) else None))
    report["cold"] = agent_eval(ALGEBRAIC, cache)
    print("harness (cold)", json.dumps(report["cold"].get("timing")), flush=True)
    for _ in range(HARNESS):
        report["harness"].append(agent_eval(ALGEBRAIC, cache))
        print("harness", json.dumps(report["harness"][-1].get("timing")), report["harness"][-1]["wall_s"], flush=True)
        dest.write_text(json.dumps(report, indent=1))

    def med(xs: list) -> float | None:
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None

    plain = [p for p in report["plain"] if "candidate" in p]
    runs = [h["timing"] for h in [report["cold"], *report["harness"]] if h.get("timing")]
    rows = {
        "candidate_device": (med([h["device_ms"] for h in runs]), med([p["candidate"]["device_ms"] for p in plain])),
        "candidate_latency": (med([h["latency_ms"] for h in runs]), med([p["candidate"]["latency_ms"] for p in plain])),
        "eager_device": (med([h["eager_device_ms"] for h in runs]), med([p["eager"]["device_ms"] for p in plain])),
        "eager_latency": (med([h["eager_latency_ms"] for h in runs]), med([p["eager"]["latency_ms"] for p in plain])),
        "compile_device": (med([h["compile_device_ms"] for h in runs]),
                           med([p["compile"]["device_ms"] for p in plain if "compile" in p])),
        "compile_latency": (med([h["compile_latency_ms"] for h in runs]),
                            med([p["compile"]["latency_ms"] for p in plain if "compile" in p])),
    }
    report["medians"] = {k: {"harness_ms": h, "plain_ms": p, "diff_pct": round(100 * (h - p) / p, 1) if h and p else None}
                         for k, (h, p) in rows.items()}
    report["ranges"] = {
        "plain_candidate_latency": [min(p["candidate"]["latency_ms"] for p in plain),
                                    max(p["candidate"]["latency_ms"] for p in plain)] if plain else None,
        "harness_candidate_latency": [min(h["latency_ms"] for h in runs), max(h["latency_ms"] for h in runs)]
        if runs else None,
    }
    dest.write_text(json.dumps(report, indent=1))
    for k, v in report["medians"].items():
        print(f"{k:18s} harness {v['harness_ms']}  plain {v['plain_ms']}  diff {v['diff_pct']} %")
    print("ranges:", report["ranges"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
