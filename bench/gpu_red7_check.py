"""GPU check of red team 7's changes, judged at gap44/memory-fusion with timing (the compiler and the real launcher,
not the interpreter).

1. hostile: each file under tests/candidates named below. Expect:
   - descriptor_shape_computes_in_the_launch.py: `rule_violation` ("PyTorch computed over"): the GPU launcher reads
     the descriptor's shape inside the launch (make_tensordesc_arg), where the candidate's __index__ takes the mean.
     A `runtime_error` (Triton refusing the object in the descriptor) also proves nothing is judged correct; on main
     this is `correct` if the launcher calls __index__ there.
   - int_subclass_computes_in_the_launch.py: anything but `correct` (the GPU launcher reads an int subclass's value
     without calling its methods, so on the GPU its pooling never runs: `incorrect` is expected).
   - forward_ref_through_singledispatch.py: `rule_violation` ("a string typing evaluated as code").
   - regenerate_the_inputs_from_the_seed.py and regenerate_the_inputs_from_the_weights_seed.py: `incorrect` (size
     odd; on main: `correct` with the timed size's kernel right only there).
   - bench/candidates/red7_pdl_options.py: `rule_violation` ("launch_pdl on kernel"): launch_pdl asked for through a
     splatted options dict (on main: `correct`).
2. legit: correct.py, legit_singledispatch_annotations.py, legit_tma_host_descriptor.py,
   legit_tma_device_descriptor_allocator.py (its allocator runs inside the launch and is now recorded: a free
   torch.empty) and legit_persistent_device_props.py: expect all `correct`.

Run `python bench/gpu_red7_check.py` on a GPU machine (a few minutes). Results: $OUT/gpu_red7_check.json (or ./).
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
HOSTILE = ["descriptor_shape_computes_in_the_launch.py", "int_subclass_computes_in_the_launch.py",
           "forward_ref_through_singledispatch.py", "regenerate_the_inputs_from_the_seed.py",
           "regenerate_the_inputs_from_the_weights_seed.py"]
LEGIT = ["correct.py", "legit_singledispatch_annotations.py", "legit_tma_host_descriptor.py",
         "legit_tma_device_descriptor_allocator.py", "legit_persistent_device_props.py"]


PDL = REPO / "bench" / "candidates" / "red7_pdl_options.py"


def main() -> None:
    names = HOSTILE + LEGIT + [PDL.name]
    reqs = [EvalRequest(source=(PDL if n == PDL.name else CANDIDATES / n).read_text(), problem=load_problem("gap44"),
                        stage=get_stage("memory-fusion"), device="cuda", time_it=True, timeout_s=300) for n in names]
    rows = []
    for name, r in zip(names, evaluate_many(reqs)):
        t = r.timing
        row = {"case": name, "expect": "correct" if name in LEGIT else "not correct", "verdict": r.verdict.value,
               "message": r.message[:300], "device_ms": t.device_ms if t else None,
               "latency_ms": t.latency_ms if t else None}
        row["ok"] = (row["verdict"] == "correct") == (name in LEGIT)
        print(json.dumps(row))
        rows.append(row)
    print("all as expected" if all(r["ok"] for r in rows) else "NOT as expected: " +
          ", ".join(r["case"] for r in rows if not r["ok"]))
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_red7_check.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
