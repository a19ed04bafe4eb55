"""Ray actors as evaluation workers (--cluster). Named raypool so that it does not shadow the `ray` package;
Ray itself is imported only inside functions (an optional extra)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Literal

from agent.errors import UserError
from agent.scale.pool import WorkerDied, WorkerPool, _Handle, _Orphans
from agent.scale.settings import slots_per_gpu as default_slots
from agent.scale.worker import EvalWorker

log = logging.getLogger(__package__)  # "agent.scale", as before the split: log lines keep their name

RAY_HINT = "pip install -e '.[ray]'"


class RayHandle(_Handle):
    """A Ray actor running EvalWorker with `resources` (num_gpus=1/slots, or num_cpus=1 in CPU mode)."""

    def __init__(self, label: str, device: str, resources: dict[str, float]) -> None:
        import ray

        self.label, self.device, self.resources = label, device, resources
        self._cls: Any = ray.remote(EvalWorker)  # an actor class: ray's types do not follow the remote methods
        self._start()

    def _start(self) -> None:
        self.actor: Any = self._cls.options(max_restarts=0, max_task_retries=0, **self.resources).remote(self.device)
        self._orphans = _Orphans()
        self._located = False

    def call(self, method: str, args: tuple, deadline_s: float) -> tuple[str, Any]:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        try:
            if not self._located:  # an actor on this host: watch its subprocesses as for a local worker
                import socket

                status, info = ray.get(self.actor.run.remote("info"), timeout=deadline_s)
                if status == "ok" and info["host"] == socket.gethostname():
                    self._orphans.pid = info["pid"]
                self._located = True
            ref = self.actor.run.remote(method, *args)
            start = time.monotonic()
            while not ray.wait([ref], timeout=0.25)[0]:
                self._orphans.track()
                if time.monotonic() - start > deadline_s:
                    self.kill()
                    raise WorkerDied(f"no answer within {deadline_s:.0f} s; killed")
            return ray.get(ref)
        except GetTimeoutError:
            self.kill()
            raise WorkerDied(f"no answer within {deadline_s:.0f} s; killed") from None
        except RayActorError as e:
            self._orphans.kill()
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise WorkerDied(f"the Ray actor died: {first[:300]}") from None

    @property
    def pid(self) -> int | None:
        return self._orphans.pid

    def kill(self) -> None:
        import ray

        try:
            ray.kill(self.actor, no_restart=True)
        except Exception as e:  # already gone
            log.debug("ray.kill: %s", e)
        self._orphans.kill()

    def restart(self) -> None:
        self.kill()
        self._start()

    def close(self) -> None:
        self.kill()


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError("--cluster needs Ray, which is not installed", RAY_HINT) from None
    return ray


def connect(cluster: str) -> Any:
    """Connect this driver to `--cluster ray://HOST:PORT | auto (RAY_ADDRESS) | local` (once per process)."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    if cluster == "auto":
        if not os.environ.get("RAY_ADDRESS"):
            raise UserError("--cluster auto: RAY_ADDRESS is not set", "give --cluster ray://HOST:PORT")
        address = os.environ["RAY_ADDRESS"]
    elif cluster == "local":
        address = "local"
    else:
        address = cluster
    kwargs: dict[str, Any] = {"log_to_driver": False}
    if address != "local":
        # Ship this package to hosts that lack it (the worker's subprocesses find it through PYTHONPATH).
        import agent

        kwargs["runtime_env"] = {"py_modules": [str(Path(agent.__file__).resolve().parent)]}
    else:
        kwargs["include_dashboard"] = False
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise UserError(f"cannot connect to the Ray cluster at {address}: {str(e).splitlines()[0][:200]}") from None
    return ray


def cluster_device(cluster: str) -> Literal["cuda", "cpu"]:
    """'cuda' when the cluster has GPUs, else 'cpu' (connects first)."""
    ray = connect(cluster)
    return "cuda" if ray.cluster_resources().get("GPU", 0) >= 1 else "cpu"


def ray_pool(cluster: str, device: str | None = None, *, max_workers: int | None = None,
             slots_per_gpu: int | None = None) -> WorkerPool:
    """Ray actors: `slots_per_gpu` per GPU of the cluster (num_gpus=1/slots), or one per CPU in CPU mode."""
    ray = connect(cluster)
    res = ray.cluster_resources()
    n_gpu = int(res.get("GPU", 0))
    device = device or ("cuda" if n_gpu else "cpu")
    if device == "cuda":
        if not n_gpu:
            raise UserError("the Ray cluster has no GPU", "add GPU nodes, or use --device cpu")
        slots = slots_per_gpu or default_slots()
        n = n_gpu * slots
        resources = {"num_gpus": 1.0 / slots, "num_cpus": 1}
        gpus = [str(i) for i in range(n_gpu)]
    else:
        n = max(1, int(res.get("CPU", 1)))
        resources = {"num_cpus": 1}
        gpus = []
    n = min(n, max_workers) if max_workers else n
    handles: list[_Handle] = [RayHandle(f"actor{i}", device, resources) for i in range(n)]
    return WorkerPool(handles, device=device, gpus=gpus, kind="ray")
