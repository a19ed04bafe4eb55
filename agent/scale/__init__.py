"""Scale out: evaluate a round's candidates on every GPU of a host, or of a Ray cluster.

    pool = local_pool(["0", "1"], "cuda")            # agent run --gpus 0,1: worker processes on this host
    pool = ray_pool("ray://head:10001")             # agent run --cluster ray://head:10001: Ray actors
    evaluator = ScaleEvaluator(pool, RoundRequests(problem=problem, device="cuda", timeout_s=180))
    results = evaluator.evaluate(sources, stage)     # agent.protocols.Evaluator: results in the candidates' order

A worker (EvalWorker) is long-lived and pinned to one GPU (CUDA_VISIBLE_DEVICES); it evaluates one candidate at
a time through the ordinary harness, so every candidate still runs in its own sandboxed subprocess. There are
`gpu_slots` workers per GPU (agent/data/harness.toml): they share the GPU's lock (agent/harness/wall/gpulock.py),
which the candidate's subprocess holds shared while it builds and validates and exclusively while it is timed
(or profiled), so a candidate's start-up and Triton compile overlap another's timing but no timing overlaps
other work on that GPU.

The driver keeps the store: candidates go out as EvalRequests (with the problem's source, so a remote host needs
no copy of it), EvalResults and .ncu-rep bytes come back. A round is a work queue drained by one driver thread
per worker. A worker that dies (its process killed, its Ray actor lost, or silent past every harness limit) is
replaced, and the candidate it held gets `runtime_error`; the others go on.

Modules, one job each:
    settings   agent/data/scale.toml
    worker     EvalWorker: the worker's side, in a local process or a Ray actor
    pool       WorkerPool, WorkerDied and the local worker processes (local_pool)
    raypool    Ray actors (connect, cluster_device, ray_pool); named so as not to shadow the `ray` package
    evaluator  ScaleEvaluator and ScaleProfiler: the loop's Evaluator and Profiler over a pool
    placement  `agent run --gpus / --cluster`: parse_gpus, placement (agent.wiring builds the parts from it)
"""

from __future__ import annotations

from agent.scale.evaluator import ScaleEvaluator, ScaleProfiler
from agent.scale.placement import Placement, parse_gpus, placement
from agent.scale.pool import LocalHandle, WorkerDied, WorkerPool, local_pool
from agent.scale.raypool import RAY_HINT, RayHandle, cluster_device, connect, ray_pool
from agent.scale.settings import ScaleSettings, scale_settings
from agent.scale.worker import EvalWorker, ProfileReply

__all__ = [
    "RAY_HINT", "EvalWorker", "LocalHandle", "Placement", "ProfileReply", "RayHandle", "ScaleEvaluator", "ScaleProfiler",
    "ScaleSettings", "WorkerDied", "WorkerPool", "cluster_device", "connect", "local_pool", "parse_gpus", "placement",
    "ray_pool", "scale_settings",
]
