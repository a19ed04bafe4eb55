"""A worker's start, cold against warm (issue 36 item 1; docs/warm-workers.md): the seconds from the parent's request
to the worker's `main` and to its `ready` mark (torch, Triton and the harness imported, the candidate next; the marks
are CLOCK_MONOTONIC, one clock for every process), the worker's whole wall time and its CPU seconds, for the same
job (the test suite's honest gap44 answer, judged in evaluate mode) started N times each way.

    python bench/suite/worker_start.py [--device cpu|cuda] [-n 5]

The first warm worker also starts its template (printed apart); the figures after it are forks.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agent.harness.wall import template  # noqa: E402
from agent.harness.job import prepare_job, read_result  # noqa: E402
from agent.harness.runner import run_job  # noqa: E402
from agent.problems import load_problem  # noqa: E402

CORRECT = (REPO / "tests" / "candidates" / "correct.py").read_text()


def cpu_s(warm: bool) -> float:
    """CPU seconds of every process a worker ran as, once waited for: ours (cold: unshare, contain.py, the worker), or
    the template's (its own fork work, and I, G and W, which it and the reapers wait for)."""
    if not warm:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime
    (pid,) = template.templates.pids()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def one(device: str, warm: bool, root: Path, i: int) -> tuple[float, float, float, bool, float]:
    """(seconds to the worker's main, to its ready mark, the worker's wall seconds, whether it was forked, its CPU
    seconds: for the first warm one, the template's start too)."""
    os.environ[template.ENV] = "1" if warm else "0"
    workdir = root / f"{'warm' if warm else 'cold'}{i}"
    job = prepare_job(workdir, "evaluate", load_problem("gap44"), code=CORRECT, device=device,  # type: ignore[arg-type]
                      seed=1)
    before = cpu_s(warm) if warm and template.templates.pids() else 0.0 if warm else cpu_s(False)
    asked = time.monotonic()
    sb = run_job(workdir, job, device, 600, None, [], None)  # type: ignore[arg-type]
    res = read_result(workdir / "result.json")
    if res is None or not res.ok or "ready" not in res.marks:
        raise SystemExit(f"the worker failed: {sb.stderr[-1500:]}")
    time.sleep(0.3)  # the template reaps its child
    return res.marks["main"] - asked, res.marks["ready"] - asked, sb.wall_s, sb.warm, cpu_s(warm) - before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("-n", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="worker-start-") as d:
        root = Path(d)
        cold = [one(args.device, False, root, i) for i in range(args.n)]
        first = one(args.device, True, root, 0)
        warm = [one(args.device, True, root, i + 1) for i in range(args.n)]
    template.templates.close()
    assert first[3] and all(w[3] for w in warm) and not any(c[3] for c in cold), "a worker did not start as asked"
    med = statistics.median
    load = os.getloadavg()[0]
    print(f"device {args.device}, {args.n} workers each way, {os.cpu_count()} cores, load average {load:.1f}")
    print("| start | to main | to ready (imports done; median, min-max) | worker wall | CPU |")
    print("|---|---|---|---|---|")
    for name, runs in (("cold", cold), ("warm", warm)):
        ready = [r[1] for r in runs]
        print(f"| {name} | {med(r[0] for r in runs):.3f} s | {med(ready):.3f} s ({min(ready):.3f}-{max(ready):.3f}) "
              f"| {med(r[2] for r in runs):.2f} s | {med(r[4] for r in runs):.2f} s |")
    print(f"| first warm (starts the template) | {first[0]:.3f} s | {first[1]:.3f} s | {first[2]:.2f} s | "
          f"{first[4]:.2f} s |")
    print(f"saved per worker: {med(r[1] for r in cold) - med(r[1] for r in warm):.2f} s to ready, "
          f"{med(r[2] for r in cold) - med(r[2] for r in warm):.2f} s of wall, "
          f"{med(r[4] for r in cold) - med(r[4] for r in warm):.2f} CPU s")


if __name__ == "__main__":
    main()
