"""Scale out: evaluate a round's candidates on every GPU of a host, or of a Ray cluster.

    pool = local_pool(["0", "1"], "cuda")            # agent run --gpus 0,1: worker processes on this host
    pool = ray_pool("ray://head:10001")             # agent run --cluster ray://head:10001: Ray actors
    evaluator = ScaleEvaluator(pool, problem, "cuda", timeout_s=180, cache_dir=..., seed=0)
    results = evaluator.evaluate(sources, stage)     # agent.loop.Evaluator: results in the candidates' order

A worker (EvalWorker) is long-lived and pinned to one GPU (CUDA_VISIBLE_DEVICES); it evaluates one candidate at
a time through the ordinary harness, so every candidate still runs in its own sandboxed subprocess. There are
`slots_per_gpu` workers per GPU (agent/data/scale.toml): they share the GPU's lock (agent/harness/gpulock.py),
which the candidate's subprocess holds shared while it builds and validates and exclusively while it is timed
(or profiled), so a candidate's start-up and Triton compile overlap another's timing but no timing overlaps
other work on that GPU.

The driver keeps the store: candidates go out as EvalRequests (with the problem's source, so a remote host needs
no copy of it), EvalResults and .ncu-rep bytes come back. A round is a work queue drained by one driver thread
per worker. A worker that dies (its process killed, its Ray actor lost, or silent past every harness limit) is
replaced, and the candidate it held gets `runtime_error`; the others go on.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import queue
import signal
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agent.errors import UserError
from agent.schema import EvalResult, Profile, ProblemSpec, Stage, Verdict

log = logging.getLogger(__name__)

RAY_HINT = "pip install -e '.[ray]'"


class ScaleSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slots_per_gpu: int
    grace_s: float


@lru_cache(maxsize=1)
def scale_settings() -> ScaleSettings:
    """agent/data/scale.toml, parsed once."""
    with open(Path(__file__).parent / "data" / "scale.toml", "rb") as f:
        return ScaleSettings.model_validate(tomllib.load(f))


def round_seed(seed: int, round_: int) -> int:
    """The seed of a round's trials: fresh inputs every round, one truth shared within it (as HarnessEvaluator)."""
    return seed * 100_003 + round_


class WorkerDied(Exception):
    """The worker process or actor is gone (or hung and was killed) while it held a candidate."""


# ---------------------------------------------------------------- the worker (a process or a Ray actor)


class ProfileReply(BaseModel):
    profile: Profile | None = None
    report: bytes | None = None
    error_kind: str = ""
    error: str = ""
    hint: str | None = None


class EvalWorker:
    """One evaluation worker: the harness on one GPU (or in CPU mode), one candidate at a time.

    Every method answers (status, value): ("ok", value), ("harness_error", message) when the problem itself
    cannot be evaluated, ("error", message) for a bug in this worker. Nothing crosses the process boundary as
    an exception (Ray and pickling mangle those)."""

    def __init__(self, device: str, gpu: str | None = None) -> None:
        if gpu is not None:  # local workers are pinned here; Ray sets CUDA_VISIBLE_DEVICES for its actors
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu
        self.device = device
        if device == "cuda":
            from agent.harness.gpulock import ENV, lock_path

            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
            os.environ[ENV] = str(lock_path(visible))  # the harness's subprocesses inherit it (job.worker_env)
        self._problems: dict[str, Path] = {}

    def run(self, method: str, *args: Any) -> tuple[str, Any]:
        from agent.harness.pipeline import HarnessError

        try:
            return "ok", getattr(self, method)(*args)
        except HarnessError as e:
            return "harness_error", str(e)
        except Exception as e:
            log.exception("evaluation worker: %s failed", method)
            return "error", f"{type(e).__name__}: {e}"

    def info(self) -> dict[str, Any]:
        import socket

        return {"pid": os.getpid(), "host": socket.gethostname(), "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                "device": self.device}

    def evaluate(self, req: Any, problem_source: str) -> EvalResult:
        from agent.harness import evaluate_many

        req = req.model_copy(update={"problem": self._local(req.problem, problem_source),
                                     "cache_dir": _usable_dir(req.cache_dir)})
        [result] = evaluate_many([req])
        return result

    def profile(self, req: Any, problem_source: str) -> ProfileReply:
        from agent.profiler import ProfileError, profile

        with tempfile.TemporaryDirectory(prefix="agent-scale-profile-") as d:
            out = Path(d) / "profile.ncu-rep"
            req = req.model_copy(update={"problem": self._local(req.problem, problem_source), "out": out, "device": 0})
            try:
                prof = profile(req)
            except ProfileError as e:
                return ProfileReply(error_kind=e.kind, error=e.message, hint=e.hint)
            return ProfileReply(profile=prof, report=out.read_bytes())

    def _local(self, problem: ProblemSpec, source: str) -> ProblemSpec:
        """The problem as a file on this host: its own path where that holds the same source, else a copy."""
        try:
            if problem.path.read_text() == source:
                return problem
        except OSError:
            pass
        key = hashlib.sha256(source.encode()).hexdigest()[:16]
        if key not in self._problems:
            d = Path(tempfile.gettempdir()) / "agent-scale-problems"
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"{problem.name}-{key}.py"
            path.write_text(source)
            self._problems[key] = path
        return problem.model_copy(update={"path": self._problems[key], "start": None})


def _usable_dir(path: Path | None) -> Path | None:
    """The driver's cache directory where this host can write it (a remote host may not have it): else memory only."""
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
        return path if os.access(path, os.W_OK) else None
    except OSError:
        return None


def _serve(conn: Any, device: str, gpu: str | None) -> None:
    """A local worker process: answer (method, args) messages until None or the pipe closes."""
    logging.basicConfig(level=logging.WARNING, format=f"[eval worker {gpu or device}] %(levelname)s %(message)s")
    worker = EvalWorker(device, gpu)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        method, args = msg
        conn.send(worker.run(method, *args))


# ---------------------------------------------------------------- handles: how the driver reaches one worker


class _Orphans:
    """The process groups a worker's sandboxed subprocesses lead (each candidate, reference, profile): they
    would outlive a killed worker (an infinite loop would spin on), so the driver notes them while the worker
    lives and kills them after. Only for a worker on this host."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.groups: set[int] = set()

    def track(self) -> None:
        if self.pid is None:
            return
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    with open(f"/proc/{entry.name}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()
                    if int(fields[1]) == self.pid:  # fields after the name: state ppid pgrp
                        self.groups.add(int(fields[2]))
                except (OSError, IndexError, ValueError):
                    continue

    def kill(self) -> None:
        own = {os.getpgid(0), self.pid}
        for g in self.groups - own:
            try:
                os.killpg(g, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.groups.clear()


class _Handle:
    label: str
    current: int | None = None  # the index of the item it is working on (tests watch it)

    def call(self, method: str, args: tuple, deadline_s: float) -> tuple[str, Any]: ...
    def restart(self) -> None: ...
    def close(self) -> None: ...


class LocalHandle(_Handle):
    """A worker process on this host (multiprocessing, spawn), pinned to `gpu`."""

    def __init__(self, label: str, device: str, gpu: str | None) -> None:
        import multiprocessing

        self.label, self.device, self.gpu = label, device, gpu
        self._ctx = multiprocessing.get_context("spawn")  # no fork of a driver that may hold CUDA or threads
        self._start()

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self.proc = self._ctx.Process(target=_serve, args=(child, self.device, self.gpu), daemon=True,
                                      name=f"agent-eval-{self.label}")
        self.proc.start()
        child.close()
        self.conn = parent
        self._orphans = _Orphans()
        self._orphans.pid = self.proc.pid

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def call(self, method: str, args: tuple, deadline_s: float) -> tuple[str, Any]:
        try:
            self.conn.send((method, args))
        except (OSError, ValueError) as e:
            raise WorkerDied(self._why(f"could not send it the candidate ({e})")) from None
        start = time.monotonic()
        while True:
            if self.conn.poll(0.25):
                try:
                    return self.conn.recv()
                except (EOFError, OSError):
                    raise WorkerDied(self._why()) from None
            self._orphans.track()
            if not self.proc.is_alive():
                raise WorkerDied(self._why())
            if time.monotonic() - start > deadline_s:
                self.kill()
                raise WorkerDied(f"no answer within {deadline_s:.0f} s; killed")

    def _why(self, what: str = "") -> str:
        self.proc.join(timeout=2)
        code = self.proc.exitcode
        if what:
            return what
        if code is not None and code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with status {code}" if code is not None else "stopped answering"

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self._orphans.kill()
        self.conn.close()

    def restart(self) -> None:
        self.kill()
        self._start()

    def close(self) -> None:
        try:
            self.conn.send(None)
            self.proc.join(timeout=5)
        except (OSError, ValueError):
            pass
        self.kill()


class RayHandle(_Handle):
    """A Ray actor running EvalWorker with `resources` (num_gpus=1/slots, or num_cpus=1 in CPU mode)."""

    def __init__(self, label: str, device: str, resources: dict[str, float]) -> None:
        import ray

        self.label, self.device, self.resources = label, device, resources
        self._cls = ray.remote(EvalWorker)
        self._start()

    def _start(self) -> None:
        self.actor = self._cls.options(max_restarts=0, max_task_retries=0, **self.resources).remote(self.device)
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


# ---------------------------------------------------------------- the pool


class WorkerPool:
    """Workers of one kind (local processes or Ray actors) and the round-robin-free work queue that feeds them."""

    def __init__(self, handles: list[_Handle], *, device: str, gpus: list[str], kind: Literal["local", "ray"]) -> None:
        if not handles:
            raise UserError("no evaluation worker could be started")
        self.handles, self.device, self.gpus, self.kind = handles, device, gpus, kind
        self._closed = False
        atexit.register(self.close)

    @property
    def workers(self) -> int:
        return len(self.handles)

    def describe(self) -> str:
        """'4 workers (local processes) on 2 GPUs (0, 1)' — what `agent run` prints."""
        what = "local processes" if self.kind == "local" else "Ray actors"
        if self.device != "cuda":
            return f"{self.workers} workers ({what}, CPU mode)"
        ids = f" ({', '.join(self.gpus)})" if self.gpus else ""
        return f"{self.workers} workers ({what}) on {len(self.gpus) or '?'} GPU{'s' if len(self.gpus) != 1 else ''}{ids}"

    def map(self, method: str, items: list[tuple], deadline_s: float,
            retry: Callable[[tuple[str, Any]], bool] | None = None) -> list[tuple[str, Any] | WorkerDied]:
        """Run method(*item) for every item on whichever worker is free; answers in the items' order.

        A dead worker's item answers WorkerDied and the worker is replaced. `retry(answer)`: True sends the
        item round once more (a candidate that only waited for the GPU)."""
        work: queue.Queue[tuple[int, tuple, int]] = queue.Queue()
        for i, item in enumerate(items):
            work.put((i, item, 0))
        answers: list[tuple[str, Any] | WorkerDied | None] = [None] * len(items)

        def drain(h: _Handle) -> None:
            while True:
                try:
                    i, item, tries = work.get_nowait()
                except queue.Empty:
                    return
                h.current = i
                try:
                    answer: tuple[str, Any] | WorkerDied = h.call(method, item, deadline_s)
                except Exception as e:  # WorkerDied, or the transport itself failed: either way the worker is lost
                    answer = e if isinstance(e, WorkerDied) else WorkerDied(f"{type(e).__name__}: {e}")
                    log.warning("evaluation worker %s died: %s; replacing it", h.label, e)
                    try:
                        h.restart()
                    except Exception as err:  # e.g. the cluster has no room: the other workers carry on
                        log.error("could not replace evaluation worker %s: %s", h.label, err)
                        answers[i] = answer
                        return
                finally:
                    h.current = None
                if retry is not None and tries == 0 and not isinstance(answer, WorkerDied) and retry(answer):
                    work.put((i, item, 1))
                    continue
                answers[i] = answer

        threads = [threading.Thread(target=drain, args=(h,), name=f"agent-drain-{h.label}", daemon=True)
                   for h in self.handles]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [a if a is not None else WorkerDied("no evaluation worker was left to take it") for a in answers]

    def call(self, method: str, args: tuple, deadline_s: float) -> tuple[str, Any] | WorkerDied:
        """One call on the first worker (profiling: no round is in flight then, the loop is sequential)."""
        h = self.handles[0]
        try:
            return h.call(method, args, deadline_s)
        except WorkerDied as e:
            log.warning("evaluation worker %s died: %s; replacing it", h.label, e)
            h.restart()
            return e

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for h in self.handles:
            try:
                h.close()
            except Exception as e:
                log.debug("closing %s: %s", h.label, e)


# ---------------------------------------------------------------- building pools


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


def local_pool(gpus: list[str], device: str, slots_per_gpu: int | None = None) -> WorkerPool:
    """Worker processes on this host: `slots_per_gpu` per GPU (cuda), or one per entry of `gpus` (cpu)."""
    if device != "cuda":
        return WorkerPool([LocalHandle(g, "cpu", None) for g in gpus], device="cpu", gpus=[], kind="local")
    slots = slots_per_gpu or scale_settings().slots_per_gpu
    handles: list[_Handle] = [LocalHandle(f"gpu{g}" + (f".{s}" if slots > 1 else ""), "cuda", g)
                              for s in range(slots) for g in gpus]  # slot-major: a short round spreads over GPUs
    return WorkerPool(handles, device="cuda", gpus=gpus, kind="local")


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


def cluster_device(cluster: str) -> str:
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
        slots = slots_per_gpu or scale_settings().slots_per_gpu
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


# ---------------------------------------------------------------- the loop's parts


class ScaleEvaluator:
    """agent.loop.Evaluator over a WorkerPool; counts candidates per minute."""

    def __init__(self, pool: WorkerPool, problem: ProblemSpec, device: str, timeout_s: float, cache_dir: Path | None,
                 seed: int, on_round: Callable[[str], None] | None = None) -> None:
        self.pool, self.problem, self.device, self.timeout_s = pool, problem, device, timeout_s
        self.cache_dir, self.seed, self.on_round = cache_dir, seed, on_round or (lambda text: None)
        self.round = 0
        self.candidates = 0
        self.busy_s = 0.0

    def evaluate(self, sources: list[str], stage: Stage) -> list[EvalResult]:
        from agent.harness import EvalRequest
        from agent.harness.pipeline import HarnessError
        from agent.harness.settings import settings

        self.round += 1
        reqs = [EvalRequest(source=s, problem=self.problem, stage=stage, device=self.device, timeout_s=self.timeout_s,
                            cache_dir=self.cache_dir, seed=round_seed(self.seed, self.round)) for s in sources]
        sb = settings().sandbox
        deadline = 2 * self.timeout_s + sb.reference_timeout_s + sb.baseline_timeout_s + scale_settings().grace_s
        source = self.problem.path.read_text()
        start = time.monotonic()
        answers = self.pool.map("evaluate", [(r, source) for r in reqs], deadline, retry=_only_waited)
        wall = time.monotonic() - start
        results: list[EvalResult] = []
        for src, answer in zip(sources, answers):
            if isinstance(answer, WorkerDied):
                results.append(_lost(src, f"the evaluation worker died while evaluating it ({answer}); "
                                          "the worker was replaced", self.device))
            elif answer[0] == "harness_error":
                raise HarnessError(answer[1])
            elif answer[0] == "error":
                results.append(_lost(src, f"harness error in the evaluation worker: {answer[1]}", self.device))
            else:
                results.append(answer[1])
        self.candidates += len(sources)
        self.busy_s += wall
        self.on_round(f"{len(sources)} candidates in {wall:.1f} s on {self.pool.describe()}: "
                      f"{_per_min(len(sources), wall):.1f} candidates/min (run: {self.rate():.1f}/min)")
        return results

    def rate(self) -> float:
        """Candidates per minute of evaluation so far."""
        return _per_min(self.candidates, self.busy_s)

    def summary(self) -> str:
        return (f"evaluated {self.candidates} candidates in {self.busy_s:.0f} s on {self.pool.describe()}: "
                f"{self.rate():.1f} candidates/min")

    def close(self) -> None:
        self.pool.close()


class ScaleProfiler:
    """agent.loop.Profiler on the pool's first worker: the report comes back as bytes into the driver's store."""

    def __init__(self, pool: WorkerPool, problem: ProblemSpec, store, run_id: str, device: str,
                 metric_set: str = "stage", timeout_s: float = 600.0, on_error=None) -> None:
        self.pool, self.problem, self.store, self.run_id, self.device = pool, problem, store, run_id, device
        self.metric_set, self.timeout_s, self.on_error = metric_set, timeout_s, on_error or (lambda msg: None)

    def profile(self, code: str, stage: Stage, candidate_id: str) -> Profile | None:
        if self.device != "cuda":
            return None  # CPU mode: there is no GPU to count
        from agent.profiler import ProfileRequest

        out = self.store.profile_path(self.run_id, candidate_id)
        req = ProfileRequest(code=code, problem=self.problem, stage=stage, metric_set=self.metric_set, out=out,
                             timeout_s=self.timeout_s)
        answer = self.pool.call("profile", (req, self.problem.path.read_text()),
                                self.timeout_s + scale_settings().grace_s)
        if isinstance(answer, WorkerDied):
            why = f"the worker died ({answer})"
        elif answer[0] != "ok":
            why = answer[1]
        elif answer[1].profile is None or answer[1].report is None:
            why = answer[1].error + (f" ({answer[1].hint})" if answer[1].hint else "")
        else:
            reply: ProfileReply = answer[1]
            out.write_bytes(reply.report or b"")
            out.with_suffix(".json").write_text(reply.profile.model_dump_json(indent=2))
            return reply.profile
        log.warning("profiling %s failed: %s", candidate_id, why)
        self.on_error(f"profiling {candidate_id} failed: {why}")
        return None


def _only_waited(answer: tuple[str, Any]) -> bool:
    """A candidate killed while it waited for the GPU lock (another candidate hung on that GPU) deserves a rerun."""
    from agent.harness.worker import GPU_WAIT

    return answer[0] == "ok" and answer[1].verdict == Verdict.TIMEOUT and GPU_WAIT in answer[1].message


def _lost(source: str, message: str, device: str) -> EvalResult:
    from agent.harness import extract
    from agent.harness.policy import kernel_names

    code = extract.extract_code(source)
    return EvalResult(verdict=Verdict.RUNTIME_ERROR, message=message, code=code,
                      kernels=kernel_names(code) if code else [], device=device)


def _per_min(n: int, seconds: float) -> float:
    return 60.0 * n / seconds if seconds > 0 else 0.0


# ---------------------------------------------------------------- wiring (agent run --gpus / --cluster)


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
    evaluator = ScaleEvaluator(pool, problem, p.device, config.timeout_s, cache_dir=store.root / "candidates" / ".cache",
                               seed=config.seed, on_round=progress.message)
    return evaluator, ScaleProfiler(pool, problem, store, run_id, p.device, on_error=progress.message)
