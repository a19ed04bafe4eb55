"""GPU check of legit9's changes and answers, timed as a real evaluation is:

- softmax_named_absent: tl.softmax, which the seed prompt lists as absent but Triton has (the policy now refuses only
  what the installed Triton lacks). Expect `correct`; absent_tanh (the manifest's absent_function, tl.tanh): expect
  `rule_violation` (absent-triton).
- parametrize_dataclass_call, json_reply_files, xml_code_cdata, prefilled_fence, blockquote: the manifest answers
  legit9 added (extraction and torch.nn.utils.parametrize). Expect `correct`.
- kb08_conv3d_in_kernel (correctness stage): Conv3d / divisor computed by a Triton kernel into a buffer, then max-pool
  + GAP + bias + channel sum in a second kernel. Validated correct in CPU mode at every size but timed out (180 s)
  while timing under the interpreter. Expect `correct`.
- kb96_window_loop_tlclamp, kb08_window_tile_max (memory-fusion): max-pool windows by div/mod and a static_range loop
  of tl.maximum with tl.clamp; a [BLOCK, 8] window tile reduced by tl.max(axis=1). Expect `correct` (CPU: correct).
- kb96_scale_folded_data: the scale folded into the ConvTranspose3d's weight and bias by .data.mul_ in __init__ (the
  harness no longer copies the Model's weights over a weight derived from the same draw). Expect `correct`.
- config_pre_hook_zero: autotune configs whose pre_hook zeroes an atomic_add output; launch_metadata_join:
  @triton.jit(launch_metadata=...), tl.range(flatten=True), tl.join/tl.permute. Expect `correct`.
- inline_asm_mul: tl.inline_asm_elementwise("mul.rn.f32 ...") in the epilogue (allowed: only PTX clock registers
  are refused; runtime_error in CPU mode, where Triton's interpreter has no inline assembly). Expect `correct`.
- unicode_identifiers: a kernel whose argument and local are Greek letters (α, μ), with a docstring and comments in
  Chinese and an emoji (correct in CPU mode; the GPU compiler names values after them). Expect `correct`.

Run `python bench/gpu_legit9_check.py` on a GPU machine; results in $OUT/gpu_legit9_check.json (or ./).
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
    fusion, kb08, kb96 = "memory-fusion", "kb_08_conv3d_div_maxpool_gap_bias_sum", "kb_96_convt3d_mul_maxpool_gap_clamp"
    return {
        "softmax_named_absent": ("conv2d_gap_bias_lse", fusion,
                                 str(CANDIDATES / "legit_softmax_named_absent_by_the_prompt.py"), "correct"),
        "absent_tanh": ("gap44", fusion, str(CANDIDATES / "absent_function.py"), "rule_violation"),
        "parametrize_dataclass_call": ("gap44", fusion, str(CANDIDATES / "legit_parametrize_dataclass_call.py"),
                                       "correct"),
        "json_reply_files": ("gap44", fusion, str(CANDIDATES / "legit_json_reply_files.md"), "correct"),
        "xml_code_cdata": ("gap44", fusion, str(CANDIDATES / "legit_xml_code_cdata.md"), "correct"),
        "prefilled_fence": ("gap44", fusion, str(CANDIDATES / "legit_prefilled_fence_reply.md"), "correct"),
        "blockquote": ("gap44", fusion, str(CANDIDATES / "legit_blockquote_reply.md"), "correct"),
        "kb08_conv3d_in_kernel": (kb08, "correctness", str(BENCH / "legit9_kb08_conv3d_in_kernel.py"), "correct"),
        "kb96_window_loop_tlclamp": (kb96, fusion, str(BENCH / "legit9_kb96_window_loop_tlclamp.py"), "correct"),
        "kb96_scale_folded_data": (kb96, fusion, str(BENCH / "legit9_kb96_scale_folded_data.py"), "correct"),
        "kb08_window_tile_max": (kb08, fusion, str(BENCH / "legit9_kb08_window_tile_max.py"), "correct"),
        "config_pre_hook_zero": ("gap44", fusion, str(BENCH / "legit9_config_pre_hook_zero.py"), "correct"),
        "launch_metadata_join": ("gap44", fusion, str(BENCH / "legit9_launch_metadata_join.py"), "correct"),
        "inline_asm_mul": ("gap44", fusion, str(BENCH / "legit9_inline_asm_mul.py"), "correct"),
        "unicode_identifiers": ("gap44", fusion, str(BENCH / "legit9_unicode_identifiers.py"), "correct"),
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
    out = Path(os.environ.get("OUT", ".")) / "gpu_legit9_check.json"
    out.write_text(json.dumps(rows, indent=1))
    wrong = [row for row in rows if row["verdict"] != row["expected"]]
    print(f"{len(rows) - len(wrong)}/{len(rows)} as expected; results in {out}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
