"""GPU check of red team 5's changes to the recorder and the timing loops (none of them can run on the CPU):

1. allocations: a forward that frees scratch and allocates again, called untraced and traced by the real Tracker; the
   addresses it is handed must be the same sequence both ways (the tracer's copies come from another stream's pool,
   and it keeps nothing of the forward alive). Expect `allocations: same in traced and untraced calls`.
2. timing with energy: `correct.py` and `legit_one_launch_per_image.py` at gap44/memory-fusion, timed (energy when
   NVML has a counter): the energy loop's checked calls are now traced and held to the run-time rules. Expect both
   `correct`, energy_mj a number (or the counter's reason), and device times as on main within the spread.

Run `python bench/gpu_red5_check.py` on a GPU machine (about 2 minutes). Results: $OUT/gpu_red5_check.json (or ./).
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


def allocations() -> dict:
    import torch
    import triton
    import triton.language as tl

    from agent.harness.trace import Tracker
    from agent.harness.trusted import Trusted

    @triton.jit
    def scale(x, y, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(y + o, tl.load(x + o, mask=o < n) * 2.0, mask=o < n)

    tracker = Tracker(Trusted("cuda"))
    tracker.install()
    x = torch.randn(1 << 20, device="cuda")

    def forward() -> tuple[list[int], torch.Tensor]:
        seen = []
        for size in (1 << 20, 1 << 16, 1 << 20):
            scratch = torch.empty(size, device="cuda")
            scale[(triton.cdiv(size, 1024),)](x, scratch, size, B=1024)
            seen.append(scratch.data_ptr())
            del scratch
        out = torch.empty(1 << 20, device="cuda")
        scale[(1024,)](x, out, 1 << 20, B=1024)
        seen.append(out.data_ptr())
        return seen, out

    runs = {}
    for traced in (False, True, False, True):
        tracker.begin(traced, [x])
        with tracker.dispatch_mode():
            seen, out = forward()
        tracker.end([out])
        torch.cuda.synchronize()
        del out
        runs.setdefault("traced" if traced else "untraced", []).append(seen)
    same = runs["traced"] == runs["untraced"]
    print(f"allocations: {'same' if same else 'DIFFERENT'} in traced and untraced calls")
    return {"same": same, **runs}


def timed() -> list[dict]:
    rows = []
    names = ["correct.py", "legit_one_launch_per_image.py"]
    reqs = [EvalRequest(source=(CANDIDATES / n).read_text(), problem=load_problem("gap44"),
                        stage=get_stage("memory-fusion"), device="cuda", time_it=True, timeout_s=300) for n in names]
    for name, r in zip(names, evaluate_many(reqs)):
        t = r.timing
        row = {"case": name, "verdict": r.verdict.value, "message": r.message[:300],
               "device_ms": t.device_ms if t else None, "energy_mj": t.energy_mj if t else None,
               "energy_note": t.energy_note if t else None}
        print(json.dumps(row))
        rows.append(row)
    return rows


def main() -> int:
    result = {"allocations": allocations(), "timed": timed()}
    out = Path(os.environ.get("OUT", ".")) / "gpu_red5_check.json"
    out.write_text(json.dumps(result, indent=1))
    ok = result["allocations"]["same"] and all(r["verdict"] == "correct" for r in result["timed"])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
