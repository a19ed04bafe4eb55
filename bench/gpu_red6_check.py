"""GPU check of red team 6's run-time changes (none of them can be shown on the CPU):

1. watch: bench/candidates/red6_watch_progress.py reads a non-blocking device-to-host copy right after a spin
   kernel: in a recorded call (the tracer synchronizes around each launch) the flag is there at once, in the others
   not, and only recorded calls do the work. First the tell itself, called through the real Tracker untraced and
   traced: expect `tell: honest when traced, skipped when not` (if it says `no tell`, the probe's spin or wait needs
   tuning on this GPU and the case proves nothing). Then the judge, timed: expect `rule_violation` with "to the
   host" in the message (on main: `correct`, with a device time far below correct.py's).
2. foreign: a traced GPU launch given an object whose data_ptr Triton calls inside the launcher is recorded
   (`foreign: [['Duck']]`), and a plain launch (tensors, ints, a float, a constexpr) records nothing (`plain: [[]]`):
   the launcher's own leading arguments (grid, stream, metadata) must never count as foreign.
3. tests/candidates/tell_by_dispatch_depth.py and duck_pointer_computes_in_the_launch.py timed on the GPU: expect
   `rule_violation` ("a tensor subclass of its own"; "a launch's arguments are tensors": the duck answers the
   interpreter's untyped_storage, so on the GPU it may instead fail in Triton's launcher: a runtime_error is fine).
4. legit: correct.py, legit_tma_host_descriptor.py, legit_one_launch_per_image.py and legit_autotune_heuristics.py
   timed at gap44/memory-fusion: expect all `correct` (no false refusal from the launch-argument check on the GPU).

Run `python bench/gpu_red6_check.py` on a GPU machine (about 3 minutes). Results: $OUT/gpu_red6_check.json (or ./).
"""

from __future__ import annotations

import importlib.util
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
WATCH = REPO / "bench" / "candidates" / "red6_watch_progress.py"


def _request(source: str) -> EvalRequest:
    return EvalRequest(source=source, problem=load_problem("gap44"), stage=get_stage("memory-fusion"), device="cuda",
                       time_it=True, timeout_s=300)


def tell(tracker) -> dict:
    """Does the probe tell recorded calls apart on this GPU? (run untraced and traced through the real Tracker)"""
    import torch

    spec = importlib.util.spec_from_file_location("red6_watch", WATCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew(64, 128, 3, 2, 1, 1, 0.5).cuda()
    x = torch.randn(16, 64, 128, 128, device="cuda")
    with torch.no_grad():
        model(x)  # compile
        seen = {}
        for traced in (False, True, False, True):
            tracker.begin(traced, [x])
            with tracker.dispatch_mode() if traced else torch.no_grad():
                took = model.recorded(x)
            tracker.end([])
            torch.cuda.synchronize()
            seen.setdefault("traced" if traced else "untraced", []).append(took)
    works = all(seen["traced"]) and not any(seen["untraced"])
    print("tell: honest when traced, skipped when not" if works else f"no tell: {seen}")
    return {"works": works, **seen}


def foreign(tracker) -> dict:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x, y, n, s, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(y + o, tl.load(x + o, mask=o < n) * s, mask=o < n)

    x, y = torch.randn(1024, device="cuda"), torch.empty(1024, device="cuda")

    class Duck:  # what a candidate would hand Triton: its data_ptr runs inside the launcher
        dtype = torch.float32

        def __getattr__(self, name):
            if name == "data_ptr":
                return x.data_ptr
            raise AttributeError(name)

    out = {}
    for label, src in (("plain", x), ("duck", Duck())):
        tracker.begin(True, [x])
        with tracker.dispatch_mode():
            scale[(1,)](src, y, 1024, 2.0, B=1024)
        _, trace = tracker.end([y])
        out[label] = [launch.foreign for launch in trace.launches] if trace else None
    print(f"plain: {out['plain']}  foreign: {out['duck']}")
    return out


def judged() -> list[dict]:
    names = ["correct.py", "legit_tma_host_descriptor.py", "legit_one_launch_per_image.py",
             "legit_autotune_heuristics.py"]
    hostile = ["tell_by_dispatch_depth.py", "duck_pointer_computes_in_the_launch.py"]
    sources = [WATCH.read_text()] + [(CANDIDATES / n).read_text() for n in hostile + names]
    rows = []
    for name, r in zip(["red6_watch_progress.py", *hostile, *names], evaluate_many([_request(s) for s in sources])):
        t = r.timing
        row = {"case": name, "verdict": r.verdict.value, "message": r.message[:300],
               "device_ms": t.device_ms if t else None, "latency_ms": t.latency_ms if t else None}
        print(json.dumps(row))
        rows.append(row)
    return rows


def main() -> None:
    from agent.harness.trace import Tracker
    from agent.harness.trusted import Trusted

    tracker = Tracker(Trusted("cuda"))  # one per process, as in a worker: it hooks Triton's launcher class
    tracker.install()
    results = {"tell": tell(tracker), "foreign": foreign(tracker), "judged": judged()}
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_red6_check.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
