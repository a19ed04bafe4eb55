"""Diagnosis (issue 15): is a host-bound call's latency a property of the process (core, placement) or noise?

The algebraic rewrite's call latency read 0.096 ms in one plain process and 0.152-0.189 ms in others, with the
same code. This times it (plain code, no harness) in several fresh processes: unpinned, then pinned to single cores
(taskset), and in blocks over time inside each process, and prints the spread within and across processes.
`python bench/diag/latency_processes.py` writes $OUT/latency_processes.json.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "suite"))
BLOCKS, REPS = 4, 100


from clocks import _module  # noqa: E402  (one loader for every bench script)

sys.path.insert(0, str(REPO / "bench" / "diag"))
from latency_overhead import latency  # noqa: E402  (one timed call for both diagnoses)


def child() -> dict:
    import torch

    problem = _module(REPO / "agent" / "problems" / "gap44.py", "gap44_lp")
    cand = _module(REPO / "bench" / "candidates" / "gap44_algebraic.py", "algebraic_lp")
    torch.manual_seed(0)
    model = cand.ModelNew(*problem.get_init_inputs()).cuda().eval()
    x = problem.get_inputs()[0].cuda()
    flush = torch.ones(256 << 18, device="cuda")
    # the same timed call as latency_overhead's (warm-up, flush, synchronized call), in blocks over time
    blocks = [{k: v for k, v in latency(model, x, flush, n=REPS).items() if k != "threads"} for _ in range(BLOCKS)]
    cpu = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[36])
    return {"blocks": blocks, "cpu": cpu, "affinity": sorted(os.sched_getaffinity(0))}


def main() -> int:
    if sys.argv[1:] == ["child"]:
        print(json.dumps(child()))
        return 0
    out: dict = {"nproc": os.cpu_count(), "runs": []}
    try:
        out["lscpu"] = subprocess.run(["lscpu"], capture_output=True, text=True).stdout[-1500:]
    except OSError:
        pass
    cores = sorted(os.sched_getaffinity(0))
    plans = [("unpinned", None)] * 4 + [(f"core {c}", c) for c in (cores[1], cores[len(cores) // 2], cores[-1])] * 2
    dest = Path(os.environ.get("OUT", ".")) / "latency_processes.json"
    for label, core in plans:
        argv = [sys.executable, __file__, "child"]
        if core is not None and shutil.which("taskset"):
            argv = ["taskset", "-c", str(core), *argv]
        t0 = time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        try:
            run = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            run = {"error": p.stderr[-800:]}
        run.update(label=label, wall_s=round(time.monotonic() - t0, 1))
        out["runs"].append(run)
        print(json.dumps(run), flush=True)
        dest.write_text(json.dumps(out, indent=1))
    medians = [statistics.median(b["latency_ms"] for b in r["blocks"]) for r in out["runs"] if "blocks" in r]
    if medians:
        out["across_processes_ms"] = {"min": min(medians), "median": statistics.median(medians), "max": max(medians)}
        print("latency across processes:", out["across_processes_ms"])
    dest.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
