"""Print BENCHMARKS.md's two-clocks tables from bench/suite/clocks.py's JSON:

    python bench/suite/clocks_tables.py bench/results/gpu_clocks_check_h100.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def ms(v: float | None) -> str:
    return f"{v:.4f}" if v is not None else "–"


def main(path: str) -> int:
    r = json.loads(Path(path).read_text())
    p, w = r["plain"], (r.get("warm") or {}).get("timing") or {}
    a = r.get("agreement_pct") or {}
    print(f"GPU: {r['gpu']}, torch {r['torch']}, {r['reps']} calls per plain measurement\n")
    print("| gap44, full size | plain device ms | harness device ms | Δ % | plain latency ms | harness latency ms | Δ % |")
    print("|---|---|---|---|---|---|---|")
    rows = [("algebraic rewrite", "candidate", w.get("device_ms"), w.get("latency_ms")),
            ("eager", "eager", w.get("eager_device_ms"), w.get("eager_latency_ms")),
            ("torch.compile", "compile", w.get("compile_device_ms"), w.get("compile_latency_ms"))]
    for label, key, dev, lat in rows:
        print(f"| {label} | {ms(p[key]['device_ms'])} | {ms(dev)} | {a.get(key + '_device')} | "
              f"{ms(p[key]['latency_ms'])} | {ms(lat)} | {a.get(key + '_latency')} |")
    print()
    print("| `agent eval` of the algebraic rewrite | wall s | verdict | phases (s) |")
    print("|---|---|---|---|")
    for label in ("cold", "warm"):
        e = r.get(label) or {}
        phases = ", ".join(f"{k} {v:.1f}" for k, v in (e.get("phases") or {}).items() if v >= 0.05)
        print(f"| {label} | {e.get('wall_s')} | {e.get('verdict')} | {phases} |")
    rs, hang = r.get("rowsum") or {}, r.get("hang") or {}
    t = rs.get("timing") or {}
    print(f"\nrow kernel (GPU-bound): device {ms(t.get('device_ms'))} ms, latency {ms(t.get('latency_ms'))} ms, "
          f"{t.get('launches')} launch(es); `agent eval` {rs.get('wall_s')} s")
    print(f"hang at full size: `agent eval` {hang.get('wall_s')} s, {hang.get('verdict')}: {hang.get('message')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
