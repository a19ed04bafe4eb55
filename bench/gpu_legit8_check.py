"""GPU check of legit8's changes and numerics, timed as a real evaluation is (both clocks and the energy loop):

- kb51_tf32_off_flags: TF32 turned off at import, cudnn.deterministic in __init__ (the worker puts the defaults back
  before any call). Expect `correct`, with a timing.
- tf32_off_in_forward: the manifest's backend_flags.py, cuDNN TF32 turned off by forward. Expect `rule_violation`
  naming cudnn.allow_tf32.
- kb42_fold_after_launch: algebraic, the conv's taps summed by PyTorch after the first launch (the weight is kept
  when a traced call begins and compared when read). Expect `correct`.
- numerics at the full sizes (CPU mode passed at the reduced ones): GroupNorm (#23) and BatchNorm (#77) variances as
  E[x^2] - E[x]^2 in one pass, the offset distribution (mean 5) included; a Kahan-summed GAP with a logsumexp in
  exp2/log2. Expect `correct` where fp32 allows it: an `incorrect` here is the formula's cancellation at that size,
  not the harness (report the worst error against the tolerance).
- kb67_direct_conv: Conv2d + erf GELU + GAP in one autotuned kernel, no conv output written (timed out in CPU mode
  under the interpreter). Expect `correct`.
- kb67_tanh_gelu: the tanh GELU where the problem uses the erf one. Expect `incorrect`.

Run `python bench/gpu_legit8_check.py` on a GPU machine; results in $OUT/gpu_legit8_check.json (or ./).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.harness import EvalRequest, evaluate_many  # noqa: E402
from agent.problems import load_problem  # noqa: E402
from agent.stages import get_stage  # noqa: E402

CANDIDATES = REPO / "tests" / "candidates"
BENCH = REPO / "bench" / "candidates"


def cases() -> dict[str, tuple[str, str, str, str]]:
    """name -> (problem, stage, code file, expected verdict)"""
    return {
        "kb51_tf32_off_flags": ("kb_51_gemm_sub_gap_lse_gelu_residual", "memory-fusion",
                                str(CANDIDATES / "legit_kb51_tf32_off_flags.py"), "correct"),
        "tf32_off_in_forward": ("gap44", "memory-fusion", str(CANDIDATES / "backend_flags.py"), "rule_violation"),
        "kb42_fold_after_launch": ("kb_42_convt2d_gap_bias_lse_sum_mul", "algebraic",
                                   str(CANDIDATES / "legit_kb42_algebraic_fold_after_launch.py"), "correct"),
        "kb23_one_pass_variance": ("kb_23_conv3d_groupnorm_mean", "memory-fusion",
                                   str(BENCH / "legit8_kb23_groupnorm_one_pass.py"), "correct"),
        "kb77_one_pass_variance": ("kb_77_convt3d_scale_batchnorm_gap", "memory-fusion",
                                   str(BENCH / "legit8_kb77_one_pass_moments.py"), "correct"),
        "lse_kahan_exp2": ("conv2d_gap_bias_lse", "memory-fusion", str(BENCH / "legit8_lse_kahan_exp2.md"), "correct"),
        "kb67_direct_conv": ("kb_67_conv2d_gelu_gap", "memory-fusion",
                             str(BENCH / "legit8_kb67_direct_conv_gelu_gap.py"), "correct"),
        "kb67_tanh_gelu": ("kb_67_conv2d_gelu_gap", "memory-fusion", str(BENCH / "legit8_kb67_tanh_gelu.py"),
                           "incorrect"),
    }


def main() -> int:
    only = os.environ.get("CASES", "").split()  # a subset by name (CASES="a b"), all by default
    chosen = {k: v for k, v in cases().items() if not only or k in only}
    reqs = [EvalRequest(source=Path(f).read_text(), problem=load_problem(problem),
                        stage=get_stage(stage), device="cuda", time_it=True)
            for problem, stage, f, _ in chosen.values()]
    rows = []
    names = list(chosen)
    progress = lambda i, r: print(f"# {names[i]}: {r.verdict.value}", file=sys.stderr, flush=True)  # noqa: E731
    for (name, (_, _, _, expected)), r in zip(chosen.items(), evaluate_many(reqs, on_result=progress)):
        t = r.timing
        rows.append({"case": name, "expected": expected, "verdict": r.verdict.value, "message": r.message,
                     "device_ms": t.device_ms if t else None, "latency_ms": t.latency_ms if t else None})
        print(f"{name:26s} {r.verdict.value:14s} {t.device_ms if t else '-'!s:>10} ms  {r.message[:160]}")
    out = Path(os.environ.get("OUT", ".")) / "gpu_legit8_check.json"
    out.write_text(json.dumps(rows, indent=1))
    wrong = [row for row in rows if row["verdict"] != row["expected"]]
    print(f"{len(rows) - len(wrong)}/{len(rows)} as expected; results in {out}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
