"""GPU check of the manifest's legitimate answers (tests/candidates/manifest.toml, every `legit_*` case): CPU mode
judges them with Triton's interpreter, which differs from the compiler (closures, range indices, libdevice: see
agent/harness/interpret.py); this judges them as the GPU does. Run `python bench/gpu_legit_check.py` on a GPU
machine: one evaluate_many at the problems' GPU sizes, no timing. Expect every line `correct`; a line that is not
names the case, its verdict and the harness's message. Results: $OUT/gpu_legit_check.json (or ./).
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.harness import EvalRequest, evaluate_many  # noqa: E402
from agent.problems import load_problem  # noqa: E402
from agent.stages import get_stage  # noqa: E402

CANDIDATES = REPO / "tests" / "candidates"


def main() -> int:
    manifest = tomllib.loads((CANDIDATES / "manifest.toml").read_text())
    cases = {name: case for name, case in manifest.items() if name.startswith("legit_")}
    reqs = [EvalRequest(source=(CANDIDATES / case["file"]).read_text(),
                        problem=load_problem(case.get("problem", "gap44")),
                        stage=get_stage(case.get("stage", "memory-fusion")), device="cuda", time_it=False,
                        timeout_s=300) for case in cases.values()]
    results = evaluate_many(reqs)
    rows = []
    for (name, case), r in zip(cases.items(), results):
        rows.append({"case": name, "expected": case["verdict"], "verdict": r.verdict.value, "message": r.message})
        print(f"{name:42s} {r.verdict.value:14s} {'' if r.verdict.value == case['verdict'] else r.message[:200]}")
    out = Path(os.environ.get("OUT", ".")) / "gpu_legit_check.json"
    out.write_text(json.dumps(rows, indent=1))
    wrong = [row for row in rows if row["verdict"] != row["expected"]]
    print(f"{len(rows) - len(wrong)}/{len(rows)} as expected; results in {out}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
