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


class HarnessEvaluator:
    """Evaluates a round of candidates with one shared reference (truth) computation."""

    def __init__(self, problem: ProblemSpec, device: str, timeout_s: float, cache_dir: Path | None, seed: int) -> None:
        self.problem, self.device, self.timeout_s, self.cache_dir, self.seed = problem, device, timeout_s, cache_dir, seed
        self.round = 0

    def evaluate(self, sources: list[str], stage: Stage) -> list[EvalResult]:
        from agent.harness import EvalRequest, evaluate_many

        # A fresh seed per round: every round's trials draw new inputs; candidates within a round share the truth.
        self.round += 1
        reqs = [
            EvalRequest(source=s, problem=self.problem, stage=stage, device=self.device, timeout_s=self.timeout_s,
                        cache_dir=self.cache_dir, seed=self.seed * 100_003 + self.round)
            for s in sources
        ]
        return evaluate_many(reqs)


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


def build_proposer(config: RunConfig, problem: ProblemSpec, gpu: GPUSpec, store, run_id: str):
    """The proposer named by config.llm: openai | offline | replay:RUN_ID."""
    llm = config.llm
    if llm == "offline":
        from agent.offline import OfflineProposer

        return OfflineProposer(problem, gpu)
    if llm.startswith("replay:"):
        from agent.llm import ReplayProposer

        source = store.resolve_run(llm.split(":", 1)[1])
        answers = store.answers(source)
        if not answers:
            raise UserError(f"run {source} recorded no answers to replay")
        # A replay spends nothing: the recorded usage stays with the run that paid for it.
        return ReplayProposer([a.model_copy(update={"usage": Usage()}) for a in answers], name=f"replay:{source}")
    if llm == "openai":
        from agent.llm import Budget, OpenAIConfig, OpenAIProposer

        def on_call(request: dict, raw: str) -> None:
            # The exchange belongs to the iteration the loop has just begun (recorded before it proposes).
            iteration = max((it.iteration for it in store.iterations(run_id)), default=0)
            store.record_call(run_id, iteration, request, raw, None)

        return OpenAIProposer(OpenAIConfig(model=config.model), budget=Budget(limit_usd=config.budget_usd),
                              on_call=on_call)
    raise UserError(f"unknown --llm {llm!r}; choose from: openai, offline, replay:RUN_ID")
