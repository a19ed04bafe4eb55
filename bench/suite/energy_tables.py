"""Issue 19's energy table from bench/suite/energy.sh's JSON: python3 bench/suite/energy_tables.py energy.json

Input: {"gpu": str, "counter": {...}, "evals": {"seed": [EvalResult JSON, ...], "memory_fusion_best": [...]}}.
Eager and torch.compile come from the evaluations' baselines (timed once, cached, so every evaluation carries the
same figures); the kernels' rows give each evaluation's energy per call (the median of the blocks), the spread over
its blocks ((p80 - p20) / median), and, with two or more evaluations (fresh processes), the range between them."""

from __future__ import annotations

import json
import statistics
import sys


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def table(data: dict) -> str:
    evals = data["evals"]
    timed = [e["timing"] for runs in evals.values() for e in runs if e.get("timing")]
    if not timed:
        return "no evaluation was timed: " + "; ".join(
            f"{k}: {e.get('verdict')} {e.get('message', '')[:120]}" for k, runs in evals.items() for e in runs)
    t0 = timed[0]
    c = data.get("counter", {})
    lines = [f"GPU: {data.get('gpu', '?')}; NVML energy counter step {_f(c.get('period_ms'), '{:.1f}')} ms, idle "
             f"power {_f(c.get('idle_w'), '{:.0f}')} W (`{c.get('note') or 'counter found'}`)", "",
             "| forward | device ms | latency ms | energy per call (mJ) | spread over blocks | across processes "
             "| mean power (W) |", "|---|---|---|---|---|---|---|",
             f"| eager | {_f(t0.get('eager_device_ms'), '{:.3f}')} | {_f(t0.get('eager_latency_ms'), '{:.3f}')} "
             f"| {_f(t0.get('eager_energy_mj'))} | {_f(t0.get('eager_energy_spread_pct'), '{:.1f} %')} | (cached) | – |",
             f"| torch.compile | {_f(t0.get('compile_device_ms'), '{:.3f}')} | "
             f"{_f(t0.get('compile_latency_ms'), '{:.3f}')} | {_f(t0.get('compile_energy_mj'))} | "
             f"{_f(t0.get('compile_energy_spread_pct'), '{:.1f} %')} | (cached) | – |"]
    names = {"seed": "seed's kernel (gap44_start.py)", "memory_fusion_best": "memory-fusion best"}
    for key, runs in evals.items():
        ts = [e["timing"] for e in runs if e.get("timing")]
        if not ts:
            lines.append(f"| {names.get(key, key)} | {runs[0].get('verdict') if runs else '–'} | | | | | |")
            continue
        mj = [t["energy_mj"] for t in ts if t.get("energy_mj") is not None]
        across = f"{min(mj):.2f}–{max(mj):.2f} ({len(mj)} runs)" if len(mj) > 1 else "–"
        lines.append(f"| {names.get(key, key)} | {statistics.median(t['device_ms'] for t in ts):.3f} | "
                     f"{statistics.median(t['latency_ms'] for t in ts):.3f} | "
                     f"{_f(statistics.median(mj) if mj else None)} | "
                     f"{_f(ts[0].get('energy_spread_pct'), '{:.1f} %')} | {across} | "
                     f"{_f(ts[0].get('power_w'), '{:.0f}')} |")
    notes = sorted({t.get("energy_note") for t in timed if t.get("energy_mj") is None and t.get("energy_note")})
    if notes:
        lines += ["", "energy: not measured: " + "; ".join(notes)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(json.load(open(sys.argv[1]))))
