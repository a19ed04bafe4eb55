"""The recorder's mechanisms on a GPU, outside any answer (none of them can run on the CPU; the answers that lean on
them are manifest cases, judged by bench/checks/manifest_verdicts.py):

1. allocations: a forward that frees scratch and allocates again, called untraced and traced by the real Tracker;
   the addresses it is handed must be the same sequence both ways (the tracer's copies come from another stream's
   pool, and it keeps nothing of the forward alive). Expect `allocations: same in traced and untraced calls`.
2. tell: tests/candidates/watch_progress_by_host_copy.py's `recorded` (a non-blocking device-to-host copy read right
   after a spin kernel) called untraced and traced: `tell: honest when traced, skipped when not` means the probe
   tells recorded calls apart on this GPU, so its manifest verdict (rule_violation, "to the host") proves something;
   `no tell` means its spin or wait needs tuning here (informational: not a failure).
3. foreign: a traced launch given an object whose data_ptr Triton calls inside the launcher is recorded
   (`foreign: [['Duck']]`), and a plain launch (tensors, ints, a float, a constexpr) records nothing (`plain: [[]]`):
   the launcher's own leading arguments (grid, stream, metadata) never count as foreign.
4. sources: agent.harness.worker.kernelsource.Sources on the compile path: a kernel whose `_src` is replaced before Sources
   is installed compiles the replacement (`control_value` 2.0: the swap matters on a GPU); one made after it and
   replaced the same way compiles the text it was made from (`guarded_value` 1.0) and is reported.

    python bench/checks/tracer_probes.py        # about a minute; $OUT/tracer_probes.json (or ./)

The last line says "all as expected" or names the probes that were not; exit 1 then.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

WATCH = REPO / "tests" / "candidates" / "watch_progress_by_host_copy.py"


def allocations(tracker) -> dict:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x, y, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(y + o, tl.load(x + o, mask=o < n) * 2.0, mask=o < n)

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

    runs: dict[str, list] = {}
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
    return {"ok": same, "same": same, **runs}


def tell(tracker) -> dict:
    """Does the probe tell recorded calls apart on this GPU? (run untraced and traced through the real Tracker)"""
    import torch

    spec = importlib.util.spec_from_file_location("watch_progress", WATCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew(64, 128, 3, 2, 1, 1, 0.5).cuda()
    x = torch.randn(16, 64, 128, 128, device="cuda")
    with torch.no_grad():
        model(x)  # compile
        seen: dict[str, list] = {}
        for traced in (False, True, False, True):
            tracker.begin(traced, [x])
            with tracker.dispatch_mode() if traced else torch.no_grad():
                took = model.recorded(x)
            tracker.end([])
            torch.cuda.synchronize()
            seen.setdefault("traced" if traced else "untraced", []).append(took)
    works = all(seen["traced"]) and not any(seen["untraced"])
    print("tell: honest when traced, skipped when not" if works else f"no tell: {seen}")
    return {"ok": True, "works": works, **seen}  # informational: a GPU where the probe cannot tell proves nothing


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
    return {"ok": out["plain"] == [[]] and out["duck"] == [["Duck"]], **out}


SOURCES = '''
import json, torch, triton, triton.language as tl
from agent.harness.worker.kernelsource import Sources

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


def sources() -> dict:
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "sources_check.py"  # Triton reads a kernel's source from its file
        script.write_text(textwrap.dedent(SOURCES))
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                           env={**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
                                "PYTHONPATH": str(REPO)})
    if r.returncode != 0:
        return {"ok": False, "error": r.stderr[-2000:]}
    row = json.loads(r.stdout.strip().splitlines()[-1])
    row["ok"] = row["control_value"] == 2.0 and row["guarded_value"] == 1.0 and row["reported"]
    print(json.dumps({"sources": row}))
    return row


def main() -> int:
    from agent.harness.worker.trace import Tracker
    from agent.harness.worker.trusted import Trusted

    tracker = Tracker(Trusted("cuda"))  # one per process, as in a worker: it hooks Triton's launcher class
    tracker.install()
    results = {"allocations": allocations(tracker), "tell": tell(tracker), "foreign": foreign(tracker),
               "sources": sources()}
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    (out / "tracer_probes.json").write_text(json.dumps(results, indent=1))
    wrong = [name for name, r in results.items() if not r["ok"]]
    print("all as expected" if not wrong else "NOT as expected: " + ", ".join(wrong))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
