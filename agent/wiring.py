"""Build the loop's parts from a RunConfig: the one place that knows every implementation.

The loop receives parts (proposer, evaluator, profiler, store); tests build their own. Here they are
made for real: the harness in its subprocess sandbox, ncu through the profiler, the chosen LLM backend.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from agent.errors import UserError
from agent.schema import EvalResult, GPUSpec, Profile, ProblemSpec, RunConfig, Stage, Usage

log = logging.getLogger(__name__)


def default_llm() -> str:
    """openai when a key is set, else the embedded offline proposer."""
    return "openai" if os.environ.get("OPENAI_API_KEY") else "offline"


def local_bandwidth(device: str) -> float | None:
    """Peak DRAM bandwidth of the GPU this process runs on (the harness's timing floor); None in CPU mode."""
    if device != "cuda":
        return None
    from agent.catalog import closest_gpu, detect_device_name

    name = detect_device_name()
    return closest_gpu(name).memory_bandwidth_gbs if name else None


class HarnessEvaluator:
    """Evaluates a round of candidates with one shared reference (truth) computation; keeps the truths and baselines
    (bounded) across rounds. `hide`: directories the candidates must not see (the store)."""

    def __init__(self, problem: ProblemSpec, device: str, timeout_s: float, cache_dir: Path | None, seed: int,
                 hide: list[Path] | None = None, bandwidth_gbs: float | None = None) -> None:
        from agent.harness import Shared

        self.problem, self.device, self.timeout_s, self.cache_dir, self.seed = problem, device, timeout_s, cache_dir, seed
        self.hide, self.bandwidth_gbs = list(hide or []), bandwidth_gbs
        self.shared = Shared()
        self.round = 0

    def evaluate(self, sources: list[str], stage: Stage) -> list[EvalResult]:
        from agent.harness import EvalRequest, evaluate_many
        from agent.harness.job import round_seed

        # A fresh seed per round: every round's trials draw new inputs; candidates within a round share the truth.
        self.round += 1
        reqs = [
            EvalRequest(source=s, problem=self.problem, stage=stage, device=self.device, timeout_s=self.timeout_s,
                        cache_dir=self.cache_dir, seed=round_seed(self.seed, self.round), hide=self.hide,
                        bandwidth_gbs=self.bandwidth_gbs)
            for s in sources
        ]
        return evaluate_many(reqs, self.shared)


class NcuProfiler:
    """Profiles a new best with ncu into profiles/<run>/<candidate>.ncu-rep; None where ncu cannot run."""

    def __init__(self, problem: ProblemSpec, store, run_id: str, device: str, metric_set: str = "stage",
                 timeout_s: float = 600.0, on_error=None) -> None:
        self.problem, self.store, self.run_id, self.device = problem, store, run_id, device
        self.metric_set, self.timeout_s, self.on_error = metric_set, timeout_s, on_error or (lambda msg: None)

    def profile(self, code: str, stage: Stage, candidate_id: str) -> Profile | None:
        if self.device != "cuda":
            return None  # CPU mode: there is no GPU to count
        from agent.profiler import ProfileError, ProfileRequest, profile

        try:
            return profile(ProfileRequest(code=code, problem=self.problem, stage=stage, metric_set=self.metric_set,
                                          out=self.store.profile_path(self.run_id, candidate_id),
                                          timeout_s=self.timeout_s))
        except ProfileError as e:  # the loop goes on without metrics; the reason is shown and logged
            log.warning("profiling %s failed: %s", candidate_id, e)
            self.on_error(f"profiling {candidate_id} failed: {e}")
            return None


class CallLog:
    """The OpenAI proposer's on_call: saves every HTTP exchange with its run.

    Built before the run exists (a bad --llm or a missing key must not leave an empty run behind); `run_id` is set
    once it does. The exchange belongs to the iteration the loop has just begun (recorded before it proposes).
    """

    def __init__(self, store, run_id: str | None = None) -> None:
        self.store, self.run_id = store, run_id

    def __call__(self, request: dict, raw: str) -> None:
        if self.run_id is None:
            raise RuntimeError("an LLM call before its run was created")
        iteration = max((it.iteration for it in self.store.iterations(self.run_id)), default=0)
        self.store.record_call(self.run_id, iteration, request, raw, None)


LLM_CHOICES = "openai, offline, replay:RUN_ID"


def check_llm(llm: str, store) -> str | None:
    """Reject a bad --llm in one line before anything is recorded; returns a replay's source run id."""
    if llm in ("openai", "offline"):
        return None
    if llm.startswith("replay:"):
        source = store.resolve_run(llm.split(":", 1)[1])
        if not store.answers(source):
            raise UserError(f"run {source} recorded no answers to replay")
        return source
    raise UserError(f"unknown --llm {llm!r}; choose from: {LLM_CHOICES}")


def build_proposer(config: RunConfig, problem: ProblemSpec, gpu: GPUSpec, store, calls: CallLog | None = None,
                   resumed: str | None = None):
    """The proposer named by config.llm: openai | offline | replay:RUN_ID.

    `resumed`: the run being resumed, whose spending counts against --budget-usd and whose complete iterations
    already consumed the first of a replay's answers.
    """
    llm = config.llm
    source = check_llm(llm, store)
    if llm == "offline":
        from agent.offline import OfflineProposer

        return OfflineProposer(problem, gpu)
    if source is not None:
        from agent.llm import ReplayProposer

        served = _answers_served(store, resumed) if resumed else 0
        # A replay spends nothing: the recorded usage stays with the run that paid for it.
        answers = [a.model_copy(update={"usage": Usage()}) for a in store.answers(source)[served:]]
        return ReplayProposer(answers, name=f"replay:{source}")
    from agent.llm import Budget, OpenAIConfig, OpenAIProposer

    spent = store.get_run(resumed).usage.cost_usd if resumed else 0.0
    return OpenAIProposer(OpenAIConfig(model=config.model), budget=Budget(limit_usd=config.budget_usd, spent_usd=spent),
                          on_call=calls or CallLog(store, resumed))


def _answers_served(store, run_id: str) -> int:
    """Answers the run's complete iterations recorded: where a resumed replay carries on."""
    from agent.loop import round_results

    last = store.resume_state(run_id).last_iteration
    return sum(len(round_results(store, run_id, n)) for n in range(1, last + 1))
