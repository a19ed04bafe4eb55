"""GPU check of red team 9's change: PyTorch's numeric flags are read where each recorded operator runs.

1. hostile, timed, `rule_violation` expected with the flag named:
   tests/candidates/backend_flag_around_the_conv.py at gap44 ("cudnn.benchmark False -> True"), and
   bench/candidates/red9_tf32_around_the_gemm.py at kb_51 ("matmul.allow_tf32 False -> True"): TF32 on around the
   GEMM alone. On main both were judged by the flags after the calls (the defaults); the second also shows whether
   TF32 alone would have passed the fp32 tolerance at the GPU's sizes (the message says which rule refused it).
2. legit, near the changed path (every recorded operator now reads ~20 flags; flags set at import or in __init__
   are undone before the calls): correct.py (gap44), legit_kb51_tf32_off_flags.py (kb_51),
   legit_kb67_cudnn_benchmark_channels_last.py (kb_67): `correct`, with timings.

3. informational: bench/candidates/red9_cudnn_plan_warmed_in_init.py (gap44) sets cudnn.benchmark at import (allowed,
   undone before the calls) and runs one convolution at the full size in __init__, while autotuning is on. Expected
   `correct`; compare its device_ms with correct.py's (the same conv and kernel): clearly lower (the script prints
   `plan_kept_ms_saved`) means cuDNN kept the plan its autotuning found after the harness turned benchmark off (its
   plan cache is keyed without the flag), and an answer buys the baseline-beating conv by setting an allowed flag.

4. informational: bench/candidates/red9_fp16_conv_autocast.py (gap44), the conv under fp16 autocast (bf16 in CPU
   mode: incorrect). Expected `incorrect` under the fp32 tolerance; where it is `correct` and faster than correct.py,
   fp16 convolutions pass as fp32 answers at the GPU's sizes (the row says; the lead decides whether that is a hole).

Run `python bench/gpu_red9_check.py` on a GPU machine (a few minutes). Results: $OUT/gpu_red9_check.json (or ./);
the last line says "all as expected" or names the cases that were not.
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

T, B = REPO / "tests" / "candidates", REPO / "bench" / "candidates"
KB51, KB67 = "kb_51_gemm_sub_gap_lse_gelu_residual", "kb_67_conv2d_gelu_gap"
# (file, problem, expected verdict, text the message must hold)
CASES = [
    (T / "backend_flag_around_the_conv.py", "gap44", "rule_violation", "cudnn.benchmark False -> True"),
    (B / "red9_tf32_around_the_gemm.py", KB51, "rule_violation", "matmul.allow_tf32 False -> True"),
    (T / "correct.py", "gap44", "correct", ""),
    (T / "legit_kb51_tf32_off_flags.py", KB51, "correct", ""),
    (T / "legit_kb67_cudnn_benchmark_channels_last.py", KB67, "correct", ""),
    (B / "red9_cudnn_plan_warmed_in_init.py", "gap44", "correct", ""),
    (B / "red9_fp16_conv_autocast.py", "gap44", "incorrect", ""),
]
INFORMATIONAL = {"red9_cudnn_plan_warmed_in_init.py", "red9_fp16_conv_autocast.py"}


def main() -> None:
    reqs = [EvalRequest(source=path.read_text(), problem=load_problem(problem), stage=get_stage("memory-fusion"),
                        device="cuda", time_it=True, timeout_s=300) for path, problem, _, _ in CASES]
    rows = []
    for (path, problem, expect, text), r in zip(CASES, evaluate_many(reqs)):
        t = r.timing
        row = {"case": path.name, "problem": problem, "expect": expect, "verdict": r.verdict.value,
               "message": r.message[:400], "device_ms": t.device_ms if t else None,
               "latency_ms": t.latency_ms if t else None}
        row["ok"] = row["verdict"] == expect and text in r.message
        print(json.dumps(row), flush=True)
        rows.append(row)
    by = {r["case"]: r for r in rows}
    warmed, plain = by["red9_cudnn_plan_warmed_in_init.py"], by["correct.py"]
    if warmed["device_ms"] and plain["device_ms"]:
        print(json.dumps({"plan_kept_ms_saved": plain["device_ms"] - warmed["device_ms"],
                          "correct_ms": plain["device_ms"], "warmed_ms": warmed["device_ms"]}))
    print("all as expected" if all(r["ok"] or r["case"] in INFORMATIONAL for r in rows) else "NOT as expected: " +
          ", ".join(r["case"] for r in rows if not r["ok"] and r["case"] not in INFORMATIONAL))
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_red9_check.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
