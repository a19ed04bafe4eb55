"""The truths and baselines a round's candidates share, computed once each, in workers that never see candidate code.

`Shared` keeps them in memory (bounded) for whoever evaluates (a LocalEvaluator, each scale worker) and, with a
cache directory, on disk across processes (agent.harness.cache): the second `agent eval` of a problem skips both.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from agent.errors import HarnessError
from agent.harness.cache import DiskCache, entry_name, fingerprint
from agent.harness.job import (
    Device,
    TimingPlan,
    TrialRecord,
    TrialSpec,
    WorkerResult,
    plan_trials,
    prepare_job,
    read_result,
)
from agent.harness.judge.verdict import sandbox_failure
from agent.harness.runner import gpu_name, load_tensors, run_job, sizes_for
from agent.harness.judge.saturation import scales
from agent.harness.judge.tiles import Widths
from agent.harness.settings import settings
from agent.harness.judge.validate import Reference
from agent.schema import ProblemSpec, SizeSet

log = logging.getLogger(__name__)


class Shared:
    """Truths and baselines, computed once per key, kept (bounded) in memory and, given a cache_dir, on disk."""

    def __init__(self, max_entries: int = 8) -> None:
        self._refs: dict[str, Reference] = {}
        self._bases: dict[str, WorkerResult | None] = {}
        self._lock = threading.Lock()  # guards the dicts; each entry is computed under its own lock (_once)
        self._computing: dict[str, threading.Lock] = {}
        self.max_entries = max_entries
        self.hits = {"reference": 0, "baseline": 0}  # disk hits, for BENCHMARKS and tests
        self._fingerprints: dict[str, str] = {}
        self._varied: dict[str, list[tuple[int, str]]] = {}
        self._widths: dict[str, Widths] = {}

    def _fingerprint(self, device: Device) -> str:
        with self._once(f"fingerprint-{device}"):
            if device not in self._fingerprints:  # nvidia-smi and the code hash: once per evaluator, not per round
                self._fingerprints[device] = fingerprint(device, gpu_name() if device == "cuda" else "cpu")
            return self._fingerprints[device]

    def widths(self, cache_dir: Path | None) -> Widths:
        """The problems' widest extents (agent.harness.judge.tiles), measured once per process and, with a cache
        directory, kept on disk beside the truths."""
        with self._lock:
            key = str(cache_dir)
            if key not in self._widths:
                self._widths[key] = Widths(DiskCache(Path(cache_dir) / "widths", settings().cache.max_mb)
                                           if cache_dir else None)
            return self._widths[key]

    def _once(self, name: str) -> threading.Lock:
        """The lock under which entry `name` is computed: a truth being computed never holds up a baseline (a GPU
        round's candidates start on the baseline while the truth they are judged against is still running)."""
        with self._lock:
            return self._computing.setdefault(name, threading.Lock())

    def reference(self, problem: ProblemSpec, device: Device, seed: int, trials: list[TrialSpec], plan: TimingPlan | None,
                  hide: list[Path], gpu_lock: Path | None = None, time_eager: bool = False,
                  cache_dir: Path | None = None) -> Reference:
        """The fp64 truths of `trials` and of the plan's timing pool (its secret positions do not change them)."""
        # the sizes too: a trial names its size by index (an answer's own size past its tile is one more)
        name = entry_name(f"{problem.name}-ref", problem.path.read_bytes(), device, seed, time_eager,
                          json.dumps([s.model_dump() for s in sizes_for(problem, device)], sort_keys=True),
                          json.dumps([t.model_dump() for t in trials], sort_keys=True),
                          plan.pool_seeds if plan else [], self._fingerprint(device))
        with self._once(name):
            if name in self._refs:
                return self._refs[name]
            disk = DiskCache(Path(cache_dir) / "references", settings().cache.max_mb) if cache_dir else None
            ref = _load_reference(disk, name, trials)
            if ref is not None:
                self.hits["reference"] += 1
            else:
                ref = _compute_reference(problem, device, seed, trials, plan, hide, gpu_lock, time_eager)
                if disk is not None:
                    disk.put(name, ".pt", lambda tmp: _save_reference(ref, tmp))
            with self._lock:
                while len(self._refs) >= self.max_entries:
                    self._refs.pop(next(iter(self._refs)))
                self._refs[name] = ref
            return ref

    def varied(self, problem: ProblemSpec, sizes: list[SizeSet], distributions: list[str], device: Device = "cpu",
               hide: list[Path] | None = None, gpu_lock: Path | None = None,
               cache_dir: Path | None = None) -> list[tuple[int, str]]:
        """The sizes at which the truth saturates on every draw and the inputs that keep it in range
        (agent.harness.judge.saturation), measured once per problem and sizes: in this process at CPU mode's sizes,
        in a worker on the GPU at its full sizes (and kept on disk beside the truths: it is the problem's, not the
        round's)."""
        name = entry_name(f"{problem.name}-varied", problem.path.read_bytes(), device,
                          json.dumps([s.model_dump() for s in sizes], sort_keys=True), json.dumps(distributions),
                          self._fingerprint(device) if device == "cuda" else "")  # on disk: this GPU and harness
        with self._once(name):
            if name in self._varied:
                return self._varied[name]
            if device != "cuda":
                found = scales(problem, sizes, distributions)
            else:
                disk = DiskCache(Path(cache_dir) / "references", settings().cache.max_mb) if cache_dir else None
                hit = disk.get(name, ".json") if disk else None
                cached = _load_varied(hit) if hit is not None else None
                found = cached if cached is not None else \
                    varied_in_worker(problem, sizes, distributions, device, hide or [], gpu_lock)
                if cached is None and disk is not None:
                    disk.put_text(name, ".json", json.dumps(found))
            self._varied[name] = found
            return found

    def baseline(self, problem: ProblemSpec, device: Device, cache_dir: Path | None, hide: list[Path],
                 gpu_lock: Path | None = None) -> WorkerResult | None:
        """Eager and torch.compile on both clocks at the problem's timed size (GPU), cached per problem/size/GPU."""
        if device != "cuda":
            return None
        name = entry_name(f"{problem.name}-base", problem.path.read_bytes(),
                          json.dumps([s.model_dump() for s in sizes_for(problem, device)], sort_keys=True),
                          self._fingerprint(device))
        with self._once(name):
            if name in self._bases:
                return self._bases[name]
            disk = DiskCache(Path(cache_dir) / "baselines", settings().cache.max_mb) if cache_dir else None
            hit = disk.get(name, ".json") if disk else None
            if hit is not None:
                try:
                    self._bases[name] = WorkerResult.model_validate_json(hit.read_text())
                    self.hits["baseline"] += 1
                    return self._bases[name]
                except (OSError, ValueError):
                    pass
            res = _compute_baseline(problem, device, hide, gpu_lock)
            self._bases[name] = res
            if res is not None and disk is not None:
                disk.put_text(name, ".json", res.model_dump_json(indent=2))
            return res


def _compute_reference(problem: ProblemSpec, device: Device, seed: int, trials: list[TrialSpec], plan: TimingPlan | None,
                       hide: list[Path], gpu_lock: Path | None, time_eager: bool) -> Reference:
    workdir = Path(tempfile.mkdtemp(prefix="agent-ref-"))
    try:
        job = prepare_job(workdir, "reference", problem, device=device, seed=seed, trials=trials, plan=plan,
                          time_eager=time_eager, gpu_lock=gpu_lock)
        sb = run_job(workdir, job, device, settings().sandbox.reference_timeout_s, None, hide, gpu_lock)
        res = read_result(workdir / "result.json")
        if res is None or not res.ok:
            why = res.error.message if res and res.error else sandbox_failure(sb)
            raise HarnessError(f"the reference for problem {problem.name} failed: {why}",
                               "check the problem file: its own Model must run, and give the same output twice, "
                               "at every size")
        ref = Reference(trials=res.trials, truths=load_tensors(res.outputs_file, "truths", workdir),
                        pool=load_tensors(res.outputs_file, "pool", workdir),
                        eager_ms=res.eager.median_ms if res.eager else None)
        if len(ref.truths) != len(ref.trials) or [t.id for t in ref.trials] != [t.id for t in trials]:
            raise HarnessError(f"the reference for problem {problem.name} wrote no truths",
                               "the problem's own Model must return tensors")
        return ref
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def varied_in_worker(problem: ProblemSpec, sizes: list[SizeSet], distributions: list[str], device: Device,
                     hide: list[Path], gpu_lock: Path | None = None) -> list[tuple[int, str]]:
    """The saturation probe in a sandboxed worker (a GPU's full sizes: the parent cannot run the Model there). A probe
    that fails adds no trial: the reference worker reports a Model that cannot run."""
    workdir = Path(tempfile.mkdtemp(prefix="agent-sat-"))
    try:
        job = prepare_job(workdir, "saturation", problem, device=device, sizes=sizes,
                          trials=plan_trials(sizes, 0, distributions), gpu_lock=gpu_lock)
        sb = run_job(workdir, job, device, settings().sandbox.reference_timeout_s, None, hide, gpu_lock)
        res = read_result(workdir / "result.json")
        if res is None or not res.ok:
            log.warning("the saturation probe of %s failed: %s", problem.name,
                        res.error.message if res and res.error else sandbox_failure(sb))
            return []
        return [(int(i), str(d)) for i, d in res.varied]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _load_varied(path: Path) -> list[tuple[int, str]] | None:
    try:
        return [(int(i), str(d)) for i, d in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        return None


def _save_reference(ref: Reference, path: Path) -> None:
    import torch

    torch.save({"trials": json.dumps([t.model_dump(mode="json") for t in ref.trials]), "truths": ref.truths,
                "pool": ref.pool, "eager_ms": ref.eager_ms}, path)


def _load_reference(disk: DiskCache | None, name: str, trials: list[TrialSpec]) -> Reference | None:
    """A cached reference, if there is a whole one for exactly these trials."""
    hit = disk.get(name, ".pt") if disk else None
    if hit is None:
        return None
    import torch

    try:
        data: dict[str, Any] = torch.load(hit, map_location="cpu", weights_only=True)
        ref = Reference(trials=[TrialRecord.model_validate(t) for t in json.loads(data["trials"])],
                        truths=list(data["truths"]), pool=list(data["pool"]), eager_ms=data["eager_ms"])
    except Exception as e:  # a torn or foreign file: recompute it
        log.debug("ignoring the cached reference %s: %s", hit, e)
        return None
    if [t.id for t in ref.trials] != [t.id for t in trials] or len(ref.truths) != len(trials):
        return None
    return ref


def _compute_baseline(problem: ProblemSpec, device: Device, hide: list[Path], gpu_lock: Path | None) -> WorkerResult | None:
    workdir = Path(tempfile.mkdtemp(prefix="agent-base-"))
    try:
        sizes = sizes_for(problem, device)[:1]
        job = prepare_job(workdir, "baseline", problem, device=device, sizes=sizes,
                          # every distribution: torch.compile's own error is measured on each (the timing uses the first)
                          trials=plan_trials(sizes, 0, settings().validation.distributions), gpu_lock=gpu_lock)
        sb = run_job(workdir, job, device, settings().sandbox.baseline_timeout_s, None, hide, gpu_lock)
        res = read_result(workdir / "result.json")
        if res is None or not res.ok:
            log.warning("baseline timing for %s failed: %s", problem.name,
                        res.error.message if res and res.error else sandbox_failure(sb))
            return None
        return res
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
