"""Print BENCHMARKS.md's throughput, scaling and latency-agreement tables (issue 15) from the JSON the GPU scripts
write:

    python bench/suite/throughput_tables.py bench/results/gpu_throughput_check_h100.json \
        bench/results/gpu_scaling_h200x2.json bench/results/gpu_scaling_h200x2_warm.json \
        bench/results/gpu_latency_agreement_h100.json bench/results/latency_processes_h100.json

Each file is recognised by its content (bench/suite/throughput.py, bench/suite/latency_agreement.py,
bench/diag/latency_processes.py).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

PHASES = ("start", "imports", "load", "compile", "validate", "timing", "exit", "gpu wait", "queued")


def rounds(path: str, r: dict) -> None:
    names = list(r["rounds"])
    first = r["rounds"][names[0]]
    print(f"`{Path(path).name}`: {r['gpu']} ({r['gpus_visible']} visible), torch {r['torch']}; a round of "
          f"{len(first['candidates'])} answers, all correct\n")
    print("| layout | round s | candidates/min | × first | per candidate: " + " · ".join(PHASES) + " (s, mean) |")
    print("|---|---|---|---|---|")
    for name in names:
        x = r["rounds"][name]
        n = len(x["candidates"])
        ph = x["phase_sums_s"]
        mean = " · ".join(f"{ph.get(k, 0.0) / n:.2f}" for k in PHASES)
        where = x.get("where", name)
        print(f"| {where} | {x['wall_s']} | {x['per_min']} | {x['per_min'] / first['per_min']:.2f}× | {mean} |")
    diffs = r.get("clock_diff_pct_vs_first") or {}
    for name, per in diffs.items():
        dev = [abs(v["device_ms"]) for v in per.values() if "device_ms" in v]
        lat = [abs(v["latency_ms"]) for v in per.values() if "latency_ms" in v]
        print(f"\n{name} vs {names[0]}, |Δ| per candidate: device clock median {statistics.median(dev):.1f} %, max "
              f"{max(dev):.1f} %; latency clock median {statistics.median(lat):.1f} %, max {max(lat):.1f} %")
    print()


def agreement(path: str, r: dict) -> None:
    print(f"`{Path(path).name}`: medians over {len(r['plain'])} plain processes and {1 + len(r['harness'])} "
          "`agent eval` processes\n")
    print("| gap44, full size | harness ms | plain ms | Δ % |")
    print("|---|---|---|---|")
    for k, v in r["medians"].items():
        h, p = v["harness_ms"], v["plain_ms"]
        print(f"| {k.replace('_', ' ')} | {h:.4f} | {p:.4f} | {v['diff_pct']} |")
    def listed(xs: list[float]) -> str:
        return ", ".join(f"{x:.4f}" for x in xs)

    plain = [p["candidate"] for p in r["plain"] if "candidate" in p]
    runs = [h["timing"] for h in [r["cold"], *r["harness"]] if h.get("timing")]
    print(f"\nper process, algebraic rewrite: plain device {listed([p['device_ms'] for p in plain])}; harness device "
          f"{listed([t['device_ms'] for t in runs])}; plain latency {listed([p['latency_ms'] for p in plain])}; "
          f"harness latency {listed([t['latency_ms'] for t in runs])}\n")


def processes(path: str, r: dict) -> None:
    print(f"`{Path(path).name}`: the algebraic rewrite's call latency, plain code, blocks of 100 calls\n")
    print("| process | core | latency ms per block | host ms per block |")
    print("|---|---|---|---|")
    for run in r["runs"]:
        if "blocks" not in run:
            continue
        lat = ", ".join(f"{b['latency_ms']:.3f}" for b in run["blocks"])
        host = ", ".join(f"{b['host_ms']:.3f}" for b in run["blocks"])
        print(f"| {run['label']} | {run['cpu']} | {lat} | {host} |")
    a = r.get("across_processes_ms") or {}
    print(f"\nacross processes (each one's median): min {a.get('min', 0):.3f}, median {a.get('median', 0):.3f}, "
          f"max {a.get('max', 0):.3f} ms\n")


def pooled(runs: list[dict]) -> None:
    """Every agreement run's processes together: plain and harness medians of the algebraic rewrite."""
    plain = [p["candidate"] for r in runs for p in r["plain"] if "candidate" in p]
    harness = [h["timing"] for r in runs for h in [r["cold"], *r["harness"]] if h.get("timing")]
    print(f"pooled over {len(runs)} runs: {len(plain)} plain and {len(harness)} `agent eval` processes\n")
    print("| algebraic rewrite | harness ms | plain ms | Δ % |")
    print("|---|---|---|---|")
    for clock in ("device_ms", "latency_ms"):
        h = statistics.median(t[clock] for t in harness)
        p = statistics.median(x[clock] for x in plain)
        print(f"| {clock.removesuffix('_ms')} | {h:.4f} | {p:.4f} | {100 * (h - p) / p:.1f} |")
    print()


def main(paths: list[str]) -> int:
    agreements = []
    for path in paths:
        r = json.loads(Path(path).read_text())
        if "rounds" in r:
            rounds(path, r)
        elif "medians" in r:
            agreement(path, r)
            agreements.append(r)
        elif "runs" in r:
            processes(path, r)
        else:
            print(f"{path}: not a file this script knows\n")
    if len(agreements) > 1:
        pooled(agreements)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
