"""Where `agent run` evaluates (--gpus / --cluster): the flags checked up front (agent.wiring builds the parts)."""

from __future__ import annotations

import os

from pydantic import BaseModel

from agent.errors import UserError
from agent.scale.pool import WorkerPool, local_pool
from agent.scale.raypool import connect, ray_pool


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


class Placement(BaseModel):
    """Where `agent run` evaluates: here (local), on this host's GPUs (--gpus), on a Ray cluster (--cluster).
    Checked before the run is created: a bad flag leaves no empty run."""

    cluster: str | None = None
    gpus: list[str] = []
    device: str

    @property
    def kind(self) -> str:
        return "cluster" if self.cluster else "gpus" if self.gpus else "local"

    def pool(self) -> WorkerPool:
        """The workers this placement names (gpus or cluster)."""
        return ray_pool(self.cluster, self.device) if self.cluster else local_pool(self.gpus, self.device)


def placement(gpus: str | None, cluster: str | None, device: str) -> Placement:
    """Validate --gpus (against the visible GPUs) or --cluster (connects to Ray); neither: local."""
    if cluster:
        connect(cluster)
        return Placement(cluster=cluster, device=device)
    if gpus:
        return Placement(gpus=parse_gpus(gpus, device), device=device)
    return Placement(device=device)
