"""Print BENCHMARKS.md's section on issue 17's gap44 goal from bench/suite/gap44_goal.sh's files:

    python bench/suite/goal_tables.py bench/results/gap44_goal_h100
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def us(v: list[float] | None) -> str:
    return f"{v[0]:.1f} ({v[1]:.1f}–{v[2]:.1f})" if v else "–"


def main(folder: str) -> int:
    d = Path(folder)
    cost = json.loads((d / "launch_cost.json").read_text())
    print(f"GPU: {cost['gpu']}, torch {cost['torch']}, triton {cost['triton']}\n")
    print("| `agent eval` in a fresh process | device ms | × eager | × compile | latency ms | × eager | × compile | launches |")
    print("|---|---|---|---|---|---|---|---|")
    for label, name in (("one-launch closed form (the anchor)", "eval_gap44_algebraic_one_launch.json"),
                        ("`--stage auto` best, exported", "best_eval.json")):
        t = json.loads((d / name).read_text())["timing"]
        print(f"| {label} | {t['device_ms']:.4f} | {t['device_speedup_vs_eager']:.1f}× | "
              f"{t['device_speedup_vs_compile']:.1f}× | {t['latency_ms']:.4f} | {t['latency_speedup_vs_eager']:.1f}× | "
              f"{t['latency_speedup_vs_compile']:.1f}× | {t['launches']} |")
    t = json.loads((d / "best_eval.json").read_text())["timing"]
    print(f"\neager: device {t['eager_device_ms']:.4f} ms, latency {t['eager_latency_ms']:.4f} ms; torch.compile: device "
          f"{t['compile_device_ms']:.4f} ms, latency {t['compile_latency_ms']:.4f} ms (same process as the best)\n")
    print("| host issue of one call (µs, median of 2000) | |\n|---|---|")
    for k, v in cost["issue_us"].items():
        print(f"| {k} | {v} |")
    print("\n| plain script, median (p20–p80) | issue µs | latency µs | device µs |\n|---|---|---|---|")
    for k, v in cost["forward"].items():
        print(f"| {k} | {v['issue_us']} | {us(v['latency_us'])} | {us(v['device_us'])} |")
    print("\n| tile rows × cols, warps, stages | device µs | issue µs | latency µs |\n|---|---|---|---|")
    rows = sorted((r for r in cost["sweep"] if "device_us" in r), key=lambda r: r["device_us"][0])
    for r in rows:
        print(f"| {r['BH']} × {r['BW']}, {r['warps']}, {r['stages']} | {us(r['device_us'])} | {r.get('issue_us', '–')} | "
              f"{us(r.get('latency_us'))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
