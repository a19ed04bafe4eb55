"""The loop's parts over a WorkerPool: ScaleEvaluator and ScaleProfiler (agent.protocols' Evaluator and Profiler)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from agent.harness.evaluator import RoundRequests
from agent.plural import count
from agent.scale.pool import WorkerDied, WorkerPool
from agent.scale.settings import scale_settings
from agent.scale.worker import ProfileReply
from agent.schema import EvalResult, OnResult, ProblemSpec, Profile, Stage, Verdict

log = logging.getLogger(__package__)  # "agent.scale", as before the split: log lines keep their name


class ScaleEvaluator:
    """agent.protocols.Evaluator over a WorkerPool; counts candidates per minute."""

    def __init__(self, pool: WorkerPool, requests: RoundRequests, on_round: Callable[[str], None] | None = None) -> None:
        self.pool, self.requests = pool, requests
        self.problem, self.timeout_s = requests.problem, requests.timeout_s
        self.on_round = on_round or (lambda text: None)
        self.round = 0
        self.candidates = 0
        self.busy_s = 0.0

    def evaluate(self, sources: list[str], stage: Stage | list[Stage],
                 on_result: OnResult | None = None) -> list[EvalResult]:
        from agent.harness.settings import settings

        self.round += 1
        reqs = self.requests.for_round(sources, stage, self.round)
        sb = settings().sandbox
        limit = self.timeout_s or max(sb.timeout_s, sb.start_allowance_s + 60 * sb.slowdown)  # the scaled one's bound
        deadline = 2 * limit + sb.reference_timeout_s + sb.baseline_timeout_s + scale_settings().grace_s
        source = self.problem.path.read_text()
        start = time.monotonic()

        def answered(i: int, answer: tuple[str, Any] | WorkerDied) -> None:
            result = self._result(sources[i], answer)
            if result is not None and on_result is not None:
                on_result(i, result)

        answers = self.pool.map("evaluate", [(r, source) for r in reqs], deadline, retry=_only_waited,
                                on_answer=answered)
        wall = time.monotonic() - start
        results: list[EvalResult] = []
        for src, answer in zip(sources, answers):
            result = self._result(src, answer)
            if result is None:
                from agent.errors import HarnessError

                assert not isinstance(answer, WorkerDied)
                raise HarnessError(answer[1], "the evaluation worker could not judge the problem itself")
            results.append(result)
        self.candidates += len(sources)
        self.busy_s += wall
        self.on_round(f"{count(len(sources), 'candidate')} in {wall:.1f} s on {self.pool.describe()}: "
                      f"{_per_min(len(sources), wall):.1f} candidates/min (run: {self.rate():.1f}/min)")
        return results

    def _result(self, source: str, answer: tuple[str, Any] | WorkerDied) -> EvalResult | None:
        """A worker's answer as the candidate's result; None where the problem itself could not be judged."""
        if isinstance(answer, WorkerDied):
            return _lost(source, f"the evaluation worker died while evaluating it ({answer}); "
                                 "the worker was replaced", self.requests.device)
        if answer[0] == "harness_error":
            return None
        if answer[0] == "error":
            return _lost(source, f"harness error in the evaluation worker: {answer[1]}", self.requests.device)
        return answer[1]

    def rate(self) -> float:
        """Candidates per minute of evaluation so far."""
        return _per_min(self.candidates, self.busy_s)

    def summary(self) -> str:
        return (f"evaluated {count(self.candidates, 'candidate')} in {self.busy_s:.0f} s on {self.pool.describe()}: "
                f"{self.rate():.1f} candidates/min")

    def close(self) -> None:
        self.pool.close()


class ScaleProfiler:
    """agent.protocols.Profiler on the pool's first worker: the report comes back as bytes into the driver's store."""

    def __init__(self, pool: WorkerPool, problem: ProblemSpec, out: Callable[[str], Path], device: str,
                 metric_set: Literal["stage", "full"] = "stage", timeout_s: float = 600.0,
                 on_error: Callable[[str], None] | None = None, hide: list[Path] | None = None) -> None:
        self.pool, self.problem, self.out, self.device = pool, problem, out, device
        self.metric_set, self.timeout_s, self.on_error = metric_set, timeout_s, on_error or (lambda msg: None)
        self.hide = hide or []  # the store, where a worker shares its host

    @property
    def enabled(self) -> bool:
        return self.device == "cuda"

    def profile(self, code: str, stage: Stage, candidate_id: str) -> Profile | None:
        if self.device != "cuda":
            return None  # CPU mode: there is no GPU to count
        from agent.profiler import ProfileRequest

        out = self.out(candidate_id)
        req = ProfileRequest(code=code, problem=self.problem, stage=stage, metric_set=self.metric_set, out=out,
                             timeout_s=self.timeout_s, hide=self.hide)
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
            prof = reply.profile
            assert prof is not None  # checked above
            out.write_bytes(reply.report or b"")
            out.with_suffix(".json").write_text(prof.model_dump_json(indent=2))
            return prof
        log.warning("profiling %s failed: %s", candidate_id, why)
        self.on_error(f"profiling {candidate_id} failed: {why}")
        return None


def _only_waited(answer: tuple[str, Any]) -> bool:
    """A verdict another candidate on the same GPU may have caused (agent.harness.pipeline.neighbours_fault)
    deserves a rerun."""
    from agent.harness.pipeline import neighbours_fault

    return answer[0] == "ok" and neighbours_fault(answer[1])


def _lost(source: str, message: str, device: str) -> EvalResult:
    from agent.harness.static import extract
    from agent.harness.static.policy import kernel_names

    code = extract.extract_code(source)
    return EvalResult(verdict=Verdict.RUNTIME_ERROR, message=message, code=code,
                      kernels=kernel_names(code) if code else [], device=device)


def _per_min(n: int, seconds: float) -> float:
    return 60.0 * n / seconds if seconds > 0 else 0.0
