"""Print BENCHMARKS.md's section on the candidate's wall and the judge from a gpu_containment_check.json
(`python bench/checks/containment_tables.py bench/results/gpu_containment_check_h100.json`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(path: str) -> int:
    d = json.loads(Path(path).read_text())
    w = d["wall"]
    print(f"Wall ({w['isolation']}): uid {w['uid']}, processes visible {w['procs']}, planted key seen: "
          f"{w['secret_seen']}, writes outside the workdir: {w['wrote_outside'] or 'none'}, CUDA matmul "
          f"{'ran' if w['matmul_ok'] else 'FAILED'}, Triton JIT kernel {'ran' if w['triton_ok'] else 'FAILED'}.\n")
    print("| candidate | expected | verdict | eval s | device ms | message (start) |")
    print("|---|---|---|---|---|---|")
    for r in d["verdicts"]:
        ms = f"{r['ms']:.4f}" if r["ms"] else ""
        msg = (r["message"] or "").replace("|", "\\|")[:90]
        print(f"| {r['name']} | {r['expected']} | {r['verdict']} | {r['eval_s']} | {ms} | {msg} |")
    agree = sum(r["verdict"] == r["expected"] for r in d["verdicts"])
    print(f"\n{agree}/{len(d['verdicts'])} as expected; key in a message: "
          f"{any(r['secret_in_message'] for r in d['verdicts'])}; total {d['total_s']} s.\n")
    print("| candidate | harness ms | ncu Σ candidate kernels ms | harness / ncu | profile s |")
    print("|---|---|---|---|---|")
    for r in d["ncu"]:
        if "error" in r:
            print(f"| {r['name']} | | | {r['error']} | |")
        else:
            print(f"| {r['name']} | {r['harness_ms']:.4f} | {r['ncu_kernels_ms']:.4f} | {r['ratio']:.2f} | {r['profile_s']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
