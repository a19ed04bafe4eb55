"""A worker's start, cold against warm (issue 36 item 1; docs/warm-workers.md): the seconds from the parent's request
to the worker's `main` (its first mark, CLOCK_MONOTONIC is one clock for every process) and the worker's whole wall
time, for the same job (the test suite's honest gap44 answer, judged in evaluate mode) started N times each way.

    python bench/suite/worker_start.py [--device cpu|cuda] [-n 5]

The first warm worker also starts its template (printed apart); the figures after it are forks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agent.harness import template  # noqa: E402
from agent.harness.job import prepare_job, read_result  # noqa: E402
from agent.harness.runner import run_worker  # noqa: E402
from agent.problems import load_problem  # noqa: E402

CORRECT = (REPO / "tests" / "candidates" / "correct.py").read_text()


def one(device: str, warm: bool, root: Path, i: int) -> tuple[float, float, bool]:
    """(seconds to the worker's main, the worker's wall seconds, whether it was forked)."""
    os.environ[template.ENV] = "1" if warm else "0"
    workdir = root / f"{'warm' if warm else 'cold'}{i}"
    job = prepare_job(workdir, "evaluate", load_problem("gap44"), code=CORRECT, device=device, seed=1)  # type: ignore[arg-type]
    asked = time.monotonic()
    sb = run_worker(workdir, job, device, 600, None, [], None)  # type: ignore[arg-type]
    res = read_result(workdir / "result.json")
    if res is None or not res.ok or "main" not in res.marks:
        raise SystemExit(f"the worker failed: {sb.stderr[-1500:]}")
    return res.marks["main"] - asked, sb.wall_s, sb.warm


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
    assert first[2] and all(w[2] for w in warm) and not any(c[2] for c in cold), "a worker did not start as asked"
    med = statistics.median
    print(f"device {args.device}, {args.n} workers each way, {os.cpu_count()} cores")
    print("| start | to main (median, min-max) | worker wall (median) |")
    print("|---|---|---|")
    for name, runs in (("cold", cold), ("warm", warm)):
        starts = [r[0] for r in runs]
        print(f"| {name} | {med(starts):.3f} s ({min(starts):.3f}-{max(starts):.3f}) | {med(r[1] for r in runs):.2f} s |")
    print(f"| first warm (starts the template) | {first[0]:.3f} s | {first[1]:.2f} s |")
    saved = med(r[0] for r in cold) - med(r[0] for r in warm)
    print(f"saved per worker: {saved:.2f} s")


if __name__ == "__main__":
    main()
