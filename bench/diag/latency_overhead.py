"""Diagnosis (issue 15): where the harness's latency clock adds host time to a host-bound candidate.

On the H100 the algebraic rewrite's call latency read 0.096 ms in a plain script and 0.139-0.159 ms in the harness
(device time agreed to 0.2 %). This measures the same call in one process as the harness's pieces are added:
plain; the launch counter (agent.harness.worker.trace.Tracker, count-only); the audit hook (agent.harness.worker.trusted.guard);
then agent.harness.worker.timing.Bench's own latency loop. Writes $OUT/latency_overhead.json.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "suite"))


from clocks import _module  # noqa: E402  (one loader for every bench script)


def latency(fn, x, flush, n: int = 300) -> dict:
    import torch

    lat, host = [], []
    with torch.no_grad():
        for _ in range(20):
            fn(x)
        for _ in range(n):
            x.normal_()
            flush.sum()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn(x)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            lat.append((t2 - t0) * 1000)
            host.append((t1 - t0) * 1000)
    return {"latency_ms": round(statistics.median(lat), 4), "host_ms": round(statistics.median(host), 4),
            "threads": len(os.listdir("/proc/self/task"))}


def main() -> int:
    import torch

    from agent.harness.job import TimingPlan
    from agent.harness.settings import settings
    from agent.harness.worker.timing import Bench
    from agent.harness.worker.trace import Tracker
    from agent.harness.worker.trusted import Trusted, guard

    problem = _module(REPO / "agent" / "problems" / "gap44.py", "gap44_diag")
    cand_path = REPO / "bench" / "candidates" / "gap44_algebraic.py"
    cand = _module(cand_path, "algebraic_diag")
    torch.manual_seed(0)
    model = cand.ModelNew(*problem.get_init_inputs()).cuda().eval()
    x = problem.get_inputs()[0].cuda()
    flush = torch.ones(256 << 18, device="cuda")
    out: dict = {"gpu": torch.cuda.get_device_name()}
    out["plain"] = latency(model, x, flush)
    trusted = Trusted("cuda")
    tracker = Tracker(trusted)
    tracker.install()
    tracker.begin(False, [], count_only=True)
    out["launch counter"] = latency(model, x, flush)
    out["launch counter"]["launches_counted"] = tracker.launches
    refusals: list[str] = []
    guard(str(cand_path), refusals.append)
    out["+ audit hook"] = latency(model, x, flush)
    plan = TimingPlan(pool_seeds=[], positions=[], fresh_seed=1)
    with torch.no_grad():
        stats = Bench(lambda: model(x), [x], plan, settings().timing, trusted, tracker).gpu()
    out["Bench"] = {"device_ms": round(stats.median_ms, 4), "latency_ms": round(stats.latency_ms or 0, 4),
                    "host_ms": round(stats.host_ms or 0, 4), "launches": stats.launches_max}
    out["refusals"] = refusals
    print(json.dumps(out, indent=1))
    dest = Path(os.environ.get("OUT", ".")) / "latency_overhead.json"
    dest.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
