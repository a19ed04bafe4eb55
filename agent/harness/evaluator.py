"""The loop's Evaluator in this process: a round's answers through the harness, one shared truth per round.

RoundRequests is what every evaluator (this one, agent.scale's on a pool of GPUs) makes its EvalRequests from, so a
round's seed, the store it hides and the timing floor are decided in one place.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Literal

from pydantic import Field

from agent.harness import runner
from agent.harness.job import round_seed
from agent.harness.pipeline import EvalRequest, Shared, evaluate_many
from agent.schema import EvalResult, Model, Objective, OnResult, Precision, ProblemSpec, Stage


class RoundRequests(Model):
    """The settings every candidate of a run is evaluated with; `for_round` makes one round's requests."""

    problem: ProblemSpec
    device: Literal["cuda", "cpu"]
    timeout_s: float | None = Field(default=None, description="per-candidate limit; None: scaled (harness.limit)")
    objective: Objective = "latency"
    precision: Precision = "fp32"
    energy: bool = Field(default=True, description="measure each correct candidate's energy per call (GPU)")
    cache_dir: Path | None = None
    seed: int = 0
    hide: list[Path] = Field(default_factory=list, description="directories candidates must not see (the store)")
    bandwidth_gbs: float | None = Field(default=None, description="the local GPU's peak (the timing floor)")
    gpu_lock: Path | None = Field(default=None, description="the GPU's lock, where several workers share it")

    def for_round(self, sources: list[str], stage: Stage | list[Stage], round_: int) -> list[EvalRequest]:
        """A fresh seed per round: every round draws new inputs; the candidates of one round share the truth. `stage`:
        the round's, or one per source."""
        stages = stage if isinstance(stage, list) else [stage] * len(sources)
        return [EvalRequest(source=s, problem=self.problem, stage=st, device=self.device, timeout_s=self.timeout_s,
                            objective=self.objective, precision=self.precision, energy=self.energy,
                            cache_dir=self.cache_dir, seed=round_seed(self.seed, round_), hide=self.hide,
                            bandwidth_gbs=self.bandwidth_gbs, gpu_lock=self.gpu_lock)
                for s, st in zip(sources, stages, strict=True)]


class LocalEvaluator:
    """agent.protocols.Evaluator here: candidates one after another on the GPU (in parallel in CPU mode); the truths
    and baselines are kept, bounded, across rounds."""

    def __init__(self, requests: RoundRequests, prestart: bool = False) -> None:
        """`prestart`: start the warm workers' template now, in the background (a run's first candidate then forks
        from it instead of importing torch after its own checks: ~4.6 s of an H200 run's first verdict)."""
        self.requests = requests
        self.shared = Shared()
        self.round = 0
        if prestart:
            threading.Thread(target=runner.prestart, args=(requests.device,), name="template-prestart",
                             daemon=True).start()

    def evaluate(self, sources: list[str], stage: Stage | list[Stage],
                 on_result: OnResult | None = None) -> list[EvalResult]:
        self.round += 1
        return evaluate_many(self.requests.for_round(sources, stage, self.round), self.shared, on_result=on_result)
