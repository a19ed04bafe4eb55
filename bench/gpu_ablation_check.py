"""GPU check of issue 34's ablation and memory-counted work share, timed as a real evaluation is (full sizes).

On a GPU the ablated call cannot see each store: after every launch it destroys (NaN) the launch's floating tensor
arguments other than the forward's inputs and the model's weights, over each one's extent, and puts them back after
the call (agent.harness.ablation). What this checks there:

- seed: the problem's starting kernel. Expect `correct` (its output depends on the launches' writes).
- legit_multiplier_after_the_kernel, legit_lse_in_pytorch_after_the_kernel, legit_gap44_tap_sums_then_matmul: small
  PyTorch operators after the kernels (the multiplier, a logsumexp over channels, a (16 x 576) @ (576 x 128) mm at
  full size). Expect `correct` (refused before: never given to a Triton kernel).
- legit_kb23_store_zero_mean, legit_kb23_atomic_zero_sum: zeros stored into torch.zeros. Expect `correct`.
- kb23_zeros_no_kernel_wrote: torch.zeros returned beside a kernel that only reads it. Expect `rule_violation`
  (still right with the launches' writes destroyed).
- alias_through_dlpack_at_an_offset, matmul_reduction_under_a_fixed_allowance: PyTorch's work through an alias, and
  an mm the Model does not run. Expect `rule_violation` (PyTorch computed over ...). storage_moved_by_resize is CPU
  only (the harness's numpy read makes a CPU buffer unresizable; on a GPU it resizes every call): expect
  `rule_violation` too.
- roundtrip_in_sixteen_launches, roundtrip_parked_in_the_output (memory-fusion): on a GPU the writes are the changed
  bytes (no per-store record): the sixteen launches are summed, and the parked intermediate changes bytes of the
  output's storage past the returned view. Expect `rule_violation` for both (the same-launch read-back itself is
  measured only in CPU mode).
- legit_split_reduction, legit_last_block_reduction, legit_autotune_prune_reset: honest partials and atomics.
  Expect `correct`.

Run `python bench/gpu_ablation_check.py` on a GPU machine; results in $OUT/gpu_ablation_check.json (or ./).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.harness import EvalRequest, evaluate_many  # noqa: E402
from agent.problems import load_problem, starting_code  # noqa: E402
from agent.stages import get_stage  # noqa: E402

CANDIDATES = REPO / "tests" / "candidates"
KB23 = "kb_23_conv3d_groupnorm_mean"


def cases() -> dict[str, tuple[str, str, str, str]]:
    """name -> (problem, stage, code file or 'seed', expected verdict)"""
    fusion, ok, refused = "memory-fusion", "correct", "rule_violation"
    table = {
        "seed": ("gap44", fusion, "seed", ok),
        "legit_multiplier_after_the_kernel": ("gap44", fusion, "", ok),
        "legit_lse_in_pytorch_after_the_kernel": ("conv2d_gap_bias_lse", fusion, "", ok),
        "legit_gap44_tap_sums_then_matmul": ("gap44", "algebraic", "", ok),
        "legit_kb23_store_zero_mean": (KB23, fusion, "", ok),
        "legit_kb23_atomic_zero_sum": (KB23, fusion, "", ok),
        "kb23_zeros_no_kernel_wrote": (KB23, fusion, "", refused),
        "alias_through_dlpack_at_an_offset": ("gap44", fusion, "", refused),
        "matmul_reduction_under_a_fixed_allowance": ("gap44", fusion, "", refused),
        "storage_moved_by_resize": ("gap44", fusion, "", refused),
        "roundtrip_in_sixteen_launches": ("gap44", fusion, "", refused),
        "roundtrip_parked_in_the_output": ("gap44", fusion, "", refused),
        "legit_split_reduction": ("gap44", fusion, "", ok),
        "legit_last_block_reduction": ("gap44", fusion, "", ok),
        "legit_autotune_prune_reset": ("gap44", fusion, "", ok),
    }
    return {k: (p, s, f or str(CANDIDATES / f"{k}.py"), e) for k, (p, s, f, e) in table.items()}


def main() -> int:
    only = os.environ.get("CASES", "").split()  # a subset by name (CASES="a b"), all by default
    chosen = {k: v for k, v in cases().items() if not only or k in only}
    reqs = [EvalRequest(source=starting_code(load_problem(problem)) if f == "seed" else Path(f).read_text(),
                        problem=load_problem(problem), stage=get_stage(stage), device="cuda", time_it=True)
            for problem, stage, f, _ in chosen.values()]
    rows = []
    names = list(chosen)
    progress = lambda i, r: print(f"# {names[i]}: {r.verdict.value}", file=sys.stderr, flush=True)  # noqa: E731
    for (name, (_, _, _, expected)), r in zip(chosen.items(), evaluate_many(reqs, on_result=progress)):
        t = r.timing
        rows.append({"case": name, "expected": expected, "verdict": r.verdict.value, "message": r.message,
                     "device_ms": t.device_ms if t else None})
        print(f"{name:42s} {r.verdict.value:14s} {t.device_ms if t else '-'!s:>10} ms  {r.message[:160]}")
    out = Path(os.environ.get("OUT", ".")) / "gpu_ablation_check.json"
    out.write_text(json.dumps(rows, indent=1))
    wrong = [row for row in rows if row["verdict"] != row["expected"]]
    print(f"{len(rows) - len(wrong)}/{len(rows)} as expected; results in {out}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
