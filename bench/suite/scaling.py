"""GPU check of agent.scale (issue 8), for a 2-GPU host (kind nvidia-h200-x2): `python bench/suite/scaling.py`.

One round of K=8 gap44 candidates at full size (variants of bench/candidates/gap44_rowsum.py and the seed's
starting kernel, agent/problems/gap44_start.py), evaluated by ScaleEvaluator with:
  1 GPU x 1 worker, 1 GPU x 2 workers (sharing the GPU lock), 2 GPUs x 1, 2 GPUs x 2, and, when `ray` is
  importable, 2 GPUs x 2 as Ray actors of a local cluster on this host.
Per layout: round wall time, candidates per minute, verdicts, and each candidate's timed ms, so that one can see
both the speed-up and that timings stay put when a GPU is shared (the lock keeps timing exclusive).

The baselines (eager, torch.compile) are computed once up front into a cache directory that every layout reads:
the figure is the steady state of a round (each round still computes its own reference, on every worker).
Results: $OUT/scaling.json (or ./scaling.json); a table is printed. Budget: < 8 minutes (layouts that would not
fit are skipped and say so).
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
# Spawned workers and Ray's workers must import this checkout too.
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

K = 8
BUDGET_S = 7 * 60  # stop starting layouts past this (the whole script must end within 8 minutes)
ROWSUM = (REPO / "bench" / "candidates" / "gap44_rowsum.py").read_text()
START = (REPO / "agent" / "problems" / "gap44_start.py").read_text()


def candidates() -> list[str]:
    """K correct, distinct candidates (distinct kernels compile separately, as an LLM round's would)."""
    out = []
    for cap, warps in [(4096, None), (2048, 4), (1024, 4), (8192, 8), (4096, 4), (2048, 8)]:
        src = ROWSUM.replace("block = min(4096, triton.next_power_of_2(hw))",
                             f"block = min({cap}, triton.next_power_of_2(hw))")
        if warps is not None:
            src = src.replace("num_warps=8 if block >= 2048 else 4", f"num_warps={warps}")
        out.append(f"# variant: cap {cap}, warps {warps or 'auto'}\n" + src)
    out += [f"# variant: seed start #{i}\n" + START for i in range(K - len(out))]
    return out[:K]


def stage():
    from agent.stages import get_stage

    return get_stage("memory-fusion")


def run_layout(name: str, make_pool, problem, cache_dir: Path, sources: list[str]) -> dict:
    from agent.harness.evaluator import RoundRequests
    from agent.scale import ScaleEvaluator

    t0 = time.monotonic()
    pool = make_pool()
    try:
        infos = [h.call("info", (), 300) for h in pool.handles]  # started and answering: not part of the round
        start_s = time.monotonic() - t0
        ev = ScaleEvaluator(pool, RoundRequests(problem=problem, device="cuda", timeout_s=180.0, cache_dir=cache_dir))
        t1 = time.monotonic()
        results = ev.evaluate(sources, stage())
        wall = time.monotonic() - t1
    finally:
        pool.close()
    ms = [r.timing.candidate_ms for r in results if r.timing]
    row = {
        "layout": name, "workers": pool.workers, "gpus": pool.gpus, "describe": pool.describe(),
        "worker_info": [i[1] if isinstance(i, tuple) else str(i) for i in infos],
        "start_s": round(start_s, 2), "round_s": round(wall, 2), "candidates_per_min": round(60 * len(sources) / wall, 2),
        "verdicts": [r.verdict.value for r in results],
        "candidate_ms": [round(r.timing.candidate_ms, 4) if r.timing else None for r in results],
        "spread_pct": [round(r.timing.candidate_spread_pct, 2) if r.timing else None for r in results],
        "eval_s": [round(r.duration_s, 2) for r in results],
        "messages": [r.message[:300] for r in results if r.verdict.value != "correct"],
        "median_ms": round(statistics.median(ms), 4) if ms else None,
    }
    print(f"{name:26s} {pool.workers:2d} workers  round {wall:6.1f} s  {row['candidates_per_min']:5.1f} cand/min  "
          f"median {row['median_ms']} ms  verdicts {sorted(set(row['verdicts']))}", flush=True)
    for m in row["messages"][:3]:
        print(f"    {m}", flush=True)
    return row


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import torch

    from agent.harness.pipeline import Shared
    from agent.problems import load_problem
    from agent.scale import local_pool, parse_gpus, ray_pool

    began = time.monotonic()
    out_dir = Path(os.environ.get("OUT", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    problem = load_problem("gap44")
    gpus = parse_gpus("all", "cuda")
    print(f"torch {torch.__version__}, GPUs visible: {gpus} ({torch.cuda.get_device_name(0)})", flush=True)
    cache_dir = Path(tempfile.mkdtemp(prefix="agent-scaling-cache-"))
    t = time.monotonic()
    base = Shared().baseline(problem, "cuda", cache_dir, [])  # cached: every layout's round reuses it
    print(f"baselines: eager {base.eager.median_ms if base and base.eager else None} ms, "
          f"compile {base.compiled.median_ms if base and base.compiled else None} ms ({time.monotonic() - t:.0f} s)",
          flush=True)
    sources = candidates()

    layouts = [("1 GPU x 1", lambda: local_pool(gpus[:1], "cuda", 1)),
               ("1 GPU x 2 (shared lock)", lambda: local_pool(gpus[:1], "cuda", 2))]
    if len(gpus) >= 2:
        layouts += [("2 GPUs x 1", lambda: local_pool(gpus[:2], "cuda", 1)),
                    ("2 GPUs x 2", lambda: local_pool(gpus[:2], "cuda", 2))]
    try:
        import ray

        def ray_layout():
            if not ray.is_initialized():
                ray.init(num_gpus=min(2, len(gpus)), include_dashboard=False, log_to_driver=False)
            return ray_pool("local", "cuda", slots_per_gpu=2)

        layouts.append((f"Ray {min(2, len(gpus))} GPUs x 2", ray_layout))
    except ImportError:
        print("ray is not importable: the Ray layout is skipped", flush=True)

    only = os.environ.get("SCALING_ONLY")  # e.g. "x 2": only the layouts whose name contains it
    if only:
        layouts = [(n, m) for n, m in layouts if any(part.strip() in n for part in only.split(","))]
    if os.environ.get("SCALING_WARMUP", "1") == "1":
        # A fresh machine's first round pays one-time costs (seen: the same 2 GPUs x 2 round took 48.5 s when run
        # first and 28.9 s when run last), which would flatter every later layout: run one round unmeasured first.
        run_layout("warm-up (not measured)", lambda: local_pool(gpus[:2], "cuda", 2), problem, cache_dir, sources)
    rows, skipped = [], []
    for name, make in layouts:
        spent = time.monotonic() - began
        # a layout takes at most about as long as 1 GPU x 1 did; don't start one that cannot end in time
        longest = max((r["round_s"] + r["start_s"] for r in rows), default=90.0)
        if spent + longest > BUDGET_S:
            skipped.append(name)
            print(f"{name}: skipped ({spent:.0f} s spent)", flush=True)
            continue
        try:
            rows.append(run_layout(name, make, problem, cache_dir, sources))
        except Exception as e:  # one layout failing must not lose the others' figures
            logging.exception("layout %s failed", name)
            rows.append({"layout": name, "error": f"{type(e).__name__}: {e}"})
    report = {"k": K, "gpus": gpus, "torch": torch.__version__, "gpu_name": torch.cuda.get_device_name(0),
              "baseline": base.model_dump(mode="json") if base else None, "layouts": rows, "skipped": skipped,
              "total_s": round(time.monotonic() - began, 1)}
    path = out_dir / "scaling.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"\n{'layout':26s} {'workers':>7s} {'round s':>8s} {'cand/min':>9s} {'speed-up':>9s} {'median ms':>10s}")
    ref = next((r for r in rows if "round_s" in r), None)
    for r in rows:
        if "round_s" in r:
            print(f"{r['layout']:26s} {r['workers']:7d} {r['round_s']:8.1f} {r['candidates_per_min']:9.1f} "
                  f"{ref['round_s'] / r['round_s']:8.2f}x {r['median_ms'] or float('nan'):10.4f}")
        else:
            print(f"{r['layout']:26s} error: {r['error'][:100]}")
    print(f"wrote {path} ({report['total_s']} s)")
    return 0


if __name__ == "__main__":  # workers are spawned: they re-import this file as __mp_main__
    sys.exit(main())
