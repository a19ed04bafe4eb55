"""GPU check of evaluation throughput (issue 15, item 5): a K=8 round of gap44 answers on one GPU.

1. where the time goes: the round evaluated one candidate at a time (gpu_slots = 1), every candidate's phases
   (agent.harness.pipeline.phases) summed, and the GPU lock's exclusive share (timing);
2. the same round with gpu_slots = 2, 3, 4 (candidates at once behind the GPU's lock): candidates per minute;
3. honesty: every correct candidate's two clocks at each slot count against its own clocks at one slot.

The disk cache of truths and baselines is warmed first (a cold round is reported separately): a run computes them
once per problem and GPU, then every round reuses them. Writes $OUT/gpu_throughput_check.json; prints a summary.
`--slots 1,3` chooses the slot counts; `--gpus` evaluates through agent.scale on those GPUs instead (2-GPU scaling).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
OUT = Path(os.environ.get("OUT", "."))
ROUND = [
    ("seed", None),
    ("rowsum", "bench/candidates/gap44_rowsum.py"),
    ("offline memory-fusion", "bench/candidates/gap44_offline_memory_fusion.py"),
    ("algebraic", "bench/candidates/gap44_algebraic.py"),
    ("split reduction", "tests/candidates/legit_split_reduction.py"),
    ("one launch per image", "tests/candidates/legit_one_launch_per_image.py"),
    ("last-block reduction", "tests/candidates/legit_last_block_reduction.py"),
    ("channels-last", "tests/candidates/legit_channels_last.py"),
]


def sources() -> list[tuple[str, str]]:
    from agent.problems import load_problem, starting_code

    seed = starting_code(load_problem("gap44"))
    return [(name, seed if path is None else (REPO / path).read_text()) for name, path in ROUND]


def local_round(srcs: list[str], slots: int, cache: Path, seed: int, energy: bool = False) -> tuple[float, list]:
    from agent.harness.evaluator import LocalEvaluator, RoundRequests
    from agent.harness.settings import settings
    from agent.problems import load_problem
    from agent.stages import get_stage

    settings().sandbox.gpu_slots = slots
    ev = LocalEvaluator(RoundRequests(problem=load_problem("gap44"), device="cuda", objective="latency",
                                      cache_dir=cache, seed=seed, energy=energy))
    t0 = time.monotonic()
    results = ev.evaluate(srcs, get_stage("memory-fusion"))
    return time.monotonic() - t0, results


def scale_round(srcs: list[str], gpus: list[str], cache: Path, seed: int, warm: bool = False,
                energy: bool = False) -> tuple[float, list, str]:
    """A round through agent.scale on `gpus`; `warm`: first a round of one answer per worker on the new pool (an
    `agent run` starts its pool once: its workers' start-up is not a round's cost), reported separately."""
    from agent.harness.evaluator import RoundRequests
    from agent.problems import load_problem
    from agent.scale import ScaleEvaluator
    from agent.scale.pool import local_pool
    from agent.stages import get_stage

    pool = local_pool(gpus, "cuda")
    ev = ScaleEvaluator(pool, RoundRequests(problem=load_problem("gap44"), device="cuda", objective="latency",
                                            cache_dir=cache, seed=seed, energy=energy))
    try:
        if warm:
            t0 = time.monotonic()
            ev.evaluate(srcs[: pool.workers], get_stage("memory-fusion"))
            print(f"   pool start-up round ({pool.workers} answers): {time.monotonic() - t0:.1f} s", flush=True)
        t0 = time.monotonic()
        results = ev.evaluate(srcs, get_stage("memory-fusion"))
        return time.monotonic() - t0, results, pool.describe()
    finally:
        ev.close()


def summary(names: list[str], wall: float, results: list) -> dict:
    rows = []
    for name, r in zip(names, results):
        t = r.timing
        rows.append({"name": name, "verdict": r.verdict.value, "duration_s": round(r.duration_s, 1),
                     "phases": r.phases, "message": r.message[:200] if r.verdict.value != "correct" else "",
                     **({"device_ms": t.device_ms, "latency_ms": t.latency_ms, "launches": t.launches}
                        if t is not None else {})})
    phases: dict[str, float] = {}
    for r in results:
        for k, v in (r.phases or {}).items():
            phases[k] = round(phases.get(k, 0.0) + v, 1)
    return {"wall_s": round(wall, 1), "per_min": round(60 * len(results) / wall, 2), "phase_sums_s": phases,
            "candidates": rows}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slots", default="1,2,3,4")
    ap.add_argument("--gpus", default=None, help="comma list: evaluate through agent.scale on these GPUs")
    ap.add_argument("--label", default="gpu_throughput_check")
    ap.add_argument("--repeat", type=int, default=1, help="the round's answers this many times (a longer round)")
    ap.add_argument("--energy", action="store_true", help="measure energy per call too (agent run does with --energy "
                    "or --objective energy: about 4 s of the GPU to itself per candidate)")
    args = ap.parse_args()
    import torch

    OUT.mkdir(parents=True, exist_ok=True)
    dest = OUT / f"{args.label}.json"
    report: dict = {"gpu": torch.cuda.get_device_name(), "gpus_visible": torch.cuda.device_count(),
                    "torch": torch.__version__, "round": [n for n, _ in ROUND], "energy": args.energy, "rounds": {}}

    def save() -> None:
        dest.write_text(json.dumps(report, indent=1))

    named = sources()
    names, srcs = [n for n, _ in named] * args.repeat, [s for _, s in named] * args.repeat
    cache = Path(tempfile.mkdtemp(prefix="agent-tp-cache-", dir="/opt" if os.access("/opt", os.W_OK) else None))
    # cold: the truths and baselines of the round's seed are computed (once per problem/GPU in a run)
    if args.gpus:
        gpus = [g.strip() for g in args.gpus.split(",")]
        wall, results, _ = scale_round(srcs[:1], gpus[:1], cache, 0, energy=args.energy)
    else:
        wall, results = local_round(srcs[:1], 1, cache, 0, args.energy)
    report["cold_first_candidate_s"] = round(wall, 1)
    save()
    print(f"cold (truths + baselines + the seed): {wall:.1f} s", flush=True)
    if args.gpus:
        for n in range(1, len(gpus) + 1):
            wall, results, where = scale_round(srcs, gpus[:n], cache, 0, warm=True, energy=args.energy)
            report["rounds"][f"{n} gpu"] = {"where": where, **summary(names, wall, results)}
            save()
            print(f"{n} GPU(s) ({where}): {wall:.1f} s, {60 * len(srcs) / wall:.2f}/min", flush=True)
    else:
        for slots in [int(s) for s in args.slots.split(",")]:
            wall, results = local_round(srcs, slots, cache, 0, args.energy)
            report["rounds"][f"{slots} slot"] = summary(names, wall, results)
            save()
            print(f"{slots} slot(s): {wall:.1f} s, {60 * len(srcs) / wall:.2f}/min, phases "
                  f"{report['rounds'][f'{slots} slot']['phase_sums_s']}", flush=True)
    # honesty: each candidate's clocks against the first configuration's
    keys = list(report["rounds"])
    if keys:
        base: dict = {}
        for c in report["rounds"][keys[0]]["candidates"]:
            base.setdefault(c["name"], c)
        agree: dict = {}
        for k in keys[1:]:
            for c in report["rounds"][k]["candidates"]:
                b = base.get(c["name"], {})
                for clock in ("device_ms", "latency_ms"):
                    if c.get(clock) and b.get(clock):
                        agree.setdefault(k, {}).setdefault(c["name"], {})[clock] = round(
                            100 * (c[clock] - b[clock]) / b[clock], 1)
            devs = [abs(v["device_ms"]) for v in agree.get(k, {}).values() if "device_ms" in v]
            if devs:
                print(f"{k}: device clock vs {keys[0]}: median |diff| {statistics.median(devs):.1f} %, max "
                      f"{max(devs):.1f} %", flush=True)
        report["clock_diff_pct_vs_first"] = agree
    save()
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
