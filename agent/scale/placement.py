"""Where `agent run` evaluates (--gpus / --cluster): the flags checked up front, then the loop's parts."""

from __future__ import annotations

import os

from pydantic import BaseModel

from agent.errors import UserError
from agent.scale.evaluator import ScaleEvaluator, ScaleProfiler
from agent.scale.pool import local_pool
from agent.scale.raypool import connect, ray_pool
from agent.schema import ProblemSpec


def parse_gpus(spec: str, device: str) -> list[str]:
    """`--gpus all|0,1,...` as CUDA_VISIBLE_DEVICES ids; indices count the GPUs this process sees.

    CPU mode: a list names that many CPU workers (for trying the path without a GPU)."""
    spec = spec.strip()
    if device != "cuda":
        if spec == "all":
            raise UserError("--gpus all: no CUDA GPU is visible", "in CPU mode, --gpus 0,1 runs two CPU workers")
        items = [s.strip() for s in spec.split(",") if s.strip()]
        if not items:
            raise UserError(f"--gpus {spec!r}: expected all or a list like 0,1")
        return [f"cpu{i}" for i in range(len(items))]
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not visible:
        import torch

        visible = [str(i) for i in range(torch.cuda.device_count())]
    if not visible:
        raise UserError("--gpus: no CUDA GPU is visible", "use --device cpu for CPU mode")
    if spec == "all":
        return visible
    try:
        wanted = [int(s) for s in spec.split(",") if s.strip()]
    except ValueError:
        raise UserError(f"--gpus {spec!r}: expected all or a list of GPU indices like 0,1") from None
    bad = [w for w in wanted if not 0 <= w < len(visible)]
    if bad or not wanted or len(set(wanted)) != len(wanted):
        raise UserError(f"--gpus {spec!r}: this process sees {len(visible)} GPU(s), indices 0..{len(visible) - 1}, "
                        "each at most once")
    return [visible[w] for w in wanted]


class Plan(BaseModel):
    """Where `agent run` evaluates: checked before the run is created (a bad flag leaves no empty run)."""

    cluster: str | None = None
    gpus: list[str] = []
    device: str


def plan(gpus: str | None, cluster: str | None, device: str) -> Plan:
    """Validate --gpus (against the visible GPUs) or --cluster (connects to Ray)."""
    if cluster:
        connect(cluster)
        return Plan(cluster=cluster, device=device)
    return Plan(gpus=parse_gpus(gpus or "all", device), device=device)


def scaled_parts(p: Plan, problem: ProblemSpec, config, store, run_id: str, progress) -> tuple[ScaleEvaluator, ScaleProfiler]:
    """The loop's evaluator and profiler over a pool of workers; round and summary lines go to `progress`."""
    pool = ray_pool(p.cluster, p.device) if p.cluster else local_pool(p.gpus, p.device)
    progress.message(f"evaluating on {pool.describe()}")
    from agent.wiring import local_bandwidth

    evaluator = ScaleEvaluator(pool, problem, p.device, config.timeout_s, cache_dir=store.root / "candidates" / ".cache",
                               seed=config.seed, on_round=progress.message, hide=[store.root],
                               bandwidth_gbs=local_bandwidth(p.device))
    return evaluator, ScaleProfiler(pool, problem, store, run_id, p.device, on_error=progress.message)
