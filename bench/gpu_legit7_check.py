"""GPU check of legit7's run-time changes, timed as a real evaluation is (both clocks and the energy loop):

- cudnn_benchmark_in_init: KernelBench #67 with `torch.backends.cudnn.benchmark = True` in __init__ (the worker puts it
  back before any call). Expect `correct`, with a timing.
- prints_every_call: the manifest's correct.py printing 2 KB on every forward: over the thousands of timed calls
  that is past the sandbox's 1 MB output limit, which killed it before the cap on the candidate's streams. Expect
  `correct`, with a timing (before: runtime_error, "printed more than the output limit").
- cudnn_benchmark_in_forward: the same flag set by forward. Expect `rule_violation` naming cudnn.benchmark.

Run `python bench/gpu_legit7_check.py` on a GPU machine; results in $OUT/gpu_legit7_check.json (or ./).
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


def cases() -> dict[str, tuple[str, str, str]]:
    """name -> (problem, code, expected verdict)"""
    correct = (CANDIDATES / "correct.py").read_text()
    forward = "    def forward(self, x):\n"
    prints = correct.replace(forward, forward + "        print('x' * 2048)\n", 1)
    in_forward = correct.replace(forward, forward + "        torch.backends.cudnn.benchmark = True\n", 1)
    assert prints != correct and in_forward != correct
    return {
        "cudnn_benchmark_in_init": ("kb_67_conv2d_gelu_gap",
                                    (CANDIDATES / "legit_kb67_cudnn_benchmark_channels_last.py").read_text(), "correct"),
        "prints_every_call": ("gap44", prints, "correct"),
        "cudnn_benchmark_in_forward": ("gap44", in_forward, "rule_violation"),
    }


def main() -> int:
    chosen = cases()
    reqs = [EvalRequest(source=code, problem=load_problem(problem), stage=get_stage("memory-fusion"), device="cuda",
                        time_it=True) for problem, code, _ in chosen.values()]
    rows = []
    for (name, (_, _, expected)), r in zip(chosen.items(), evaluate_many(reqs)):
        t = r.timing
        rows.append({"case": name, "expected": expected, "verdict": r.verdict.value, "message": r.message,
                     "device_ms": t.device_ms if t else None, "latency_ms": t.latency_ms if t else None})
        print(f"{name:28s} {r.verdict.value:14s} {t.device_ms if t else '-'!s:>10} ms  {r.message[:160]}")
    out = Path(os.environ.get("OUT", ".")) / "gpu_legit7_check.json"
    out.write_text(json.dumps(rows, indent=1))
    wrong = [row for row in rows if row["verdict"] != row["expected"]]
    print(f"{len(rows) - len(wrong)}/{len(rows)} as expected; results in {out}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
