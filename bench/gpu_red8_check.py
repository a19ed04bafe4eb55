"""GPU check of red team 8's changes (the compiler and the real launcher, not the interpreter).

1. sources: agent.harness.kernelsource.Sources on the GPU's compile path, outside the harness (the static check now
   refuses every way an answer had to replace a kernel's `_src`; this shows the wall behind it). A kernel whose `_src`
   is replaced before Sources is installed compiles the replacement (control: `control_value` 2.0: the swap matters
   on the GPU); one made after it and replaced the same way compiles the text it was made from (`guarded_value` 1.0)
   and is reported (`reported` true).
2. hostile, judged at gap44/memory-fusion with timing, anything but `correct` expected: method_shadowed_on_a_tensor.py
   (`incorrect`: the tracker no longer calls the tensor's own numel), finalizer_inside_the_recorder.py (`incorrect`:
   no collection starts inside a call), recursion_edge_tell.py (`rule_violation`, "recursion limit"); and
   bench/candidates/red8_recursion_edge_unreported.py, the same tell one frame from the limit, where nothing is
   reported: `ok` where it is not correct or its latency is above eager's (the probe's ~15 ms a call).
3. legit, near the changed paths (launch arguments read through their class, inputs and outputs checked for attributes
   of their own before every timed call, Triton's JITCallable.__init__/parse wrapped): correct.py,
   legit_split_reduction.py, legit_tma_host_descriptor.py, legit_tma_device_descriptor_allocator.py,
   legit_autotune_heuristics.py, legit_persistent_device_props.py: expect all `correct`, with timings.

Run `python bench/gpu_red8_check.py` on a GPU machine (a few minutes). Results: $OUT/gpu_red8_check.json (or ./);
the last line says "all as expected" or names the cases that were not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.harness import EvalRequest, evaluate_many  # noqa: E402
from agent.problems import load_problem  # noqa: E402
from agent.stages import get_stage  # noqa: E402

CANDIDATES = REPO / "tests" / "candidates"
HOSTILE = ["method_shadowed_on_a_tensor.py", "finalizer_inside_the_recorder.py", "recursion_edge_tell.py"]
UNREPORTED = REPO / "bench" / "candidates" / "red8_recursion_edge_unreported.py"
LEGIT = ["correct.py", "legit_split_reduction.py", "legit_tma_host_descriptor.py",
         "legit_tma_device_descriptor_allocator.py", "legit_autotune_heuristics.py",
         "legit_persistent_device_props.py"]

SOURCES = '''
import json, torch, triton, triton.language as tl
from agent.harness.kernelsource import Sources

@triton.jit
def before(out):
    tl.store(out + tl.arange(0, 16), tl.full((16,), 1.0, tl.float32))

SWAP = "def {name}(out):\\n    tl.store(out + tl.arange(0, 16), tl.full((16,), 2.0, tl.float32))\\n"
before._src, before.hash = SWAP.format(name="before"), None  # a trusted script may: the answer's ways are refused
control = torch.zeros(16, device="cuda")
before[(1,)](control)

sources = Sources()
sources.install()

@triton.jit
def after(out):
    tl.store(out + tl.arange(0, 16), tl.full((16,), 1.0, tl.float32))

after._src, after.hash = SWAP.format(name="after"), None
guarded = torch.zeros(16, device="cuda")
after[(1,)](guarded)
torch.cuda.synchronize()
print(json.dumps({"control_value": float(control[0]), "guarded_value": float(guarded[0]),
                  "reported": bool(sources.swapped), "swapped": sources.swapped}))
'''


def sources_check() -> dict:
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "sources_check.py"  # Triton reads a kernel's source from its file
        script.write_text(textwrap.dedent(SOURCES))
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                           env={**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
                                "PYTHONPATH": str(REPO)})
    if r.returncode != 0:
        return {"case": "sources", "ok": False, "error": r.stderr[-2000:]}
    row = {"case": "sources", **json.loads(r.stdout.strip().splitlines()[-1])}
    row["ok"] = row["control_value"] == 2.0 and row["guarded_value"] == 1.0 and row["reported"]
    return row


def main() -> None:
    rows = [sources_check()]
    print(json.dumps(rows[0]))
    names = HOSTILE + LEGIT + [UNREPORTED.name]
    reqs = [EvalRequest(source=(UNREPORTED if n == UNREPORTED.name else CANDIDATES / n).read_text(),
                        problem=load_problem("gap44"),
                        stage=get_stage("memory-fusion"), device="cuda", time_it=True, timeout_s=300) for n in names]
    progress = lambda i, r: print(f"# {names[i]}: {r.verdict.value}", file=sys.stderr, flush=True)  # noqa: E731
    for name, r in zip(names, evaluate_many(reqs, on_result=progress)):
        t = r.timing
        row = {"case": name, "expect": "correct" if name in LEGIT else "not correct", "verdict": r.verdict.value,
               "message": r.message[:300], "device_ms": t.device_ms if t else None,
               "latency_ms": t.latency_ms if t else None}
        row["ok"] = (row["verdict"] == "correct") == (name in LEGIT)
        if name == UNREPORTED.name:  # the tell's price: correct only at a latency above eager's
            eager = t.eager_latency_ms if t else None
            row["eager_latency_ms"] = eager
            row["ok"] = row["verdict"] != "correct" or bool(t and eager and t.latency_ms and t.latency_ms > eager)
        print(json.dumps(row))
        rows.append(row)
    print("all as expected" if all(r["ok"] for r in rows) else "NOT as expected: " +
          ", ".join(r["case"] for r in rows if not r["ok"]))
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_red8_check.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
