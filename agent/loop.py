"""The optimization loop: render → propose → evaluate → profile → record, one iteration at a time.

It receives its parts (built by agent.wiring) and reads top to bottom; every decision it takes
(which stage, whether a candidate is the new best, why it stopped) is recorded in the store.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from agent.crosscheck import timing_doubt
from agent.errors import StopRun, UserError
from agent.problems import starting_code
from agent.prompts import PromptInput, render
from agent.schema import (
    Answer,
    Candidate,
    EvalResult,
    Feedback,
    GPUSpec,
    Profile,
    ProblemSpec,
    RunConfig,
    Stage,
    Usage,
    Verdict,
)
from agent.stages import get_stage, load_stages

log = logging.getLogger(__name__)

# A new best must beat the old one by more than the two timings' mean spread ((p80 - p20) / median), and
# never by less than this floor: on an H100 repeated harness timings of one kernel agree within 0.2-0.4 %,
# and a GAP-kernel gain of ~6 µs on a 1.39 ms forward (0.4 %) is real (ncu confirms it).
MIN_GAIN = 0.003


class Proposer(Protocol):
    name: str

    def propose(self, prompt: str, k: int) -> list[Answer]: ...


@runtime_checkable
class Observer(Protocol):
    """Proposers that use more than the prompt (the offline one) get the current state first."""

    def observe(self, stage: str, code: str, profile: Profile | None, results: list[EvalResult] | None) -> None: ...


class Evaluator(Protocol):
    def evaluate(self, sources: list[str], stage: Stage) -> list[EvalResult]: ...


class Profiler(Protocol):
    def profile(self, code: str, stage: Stage, candidate_id: str) -> Profile | None: ...


class Progress(Protocol):
    def start_iteration(self, iteration: int, stage: str, reason: str) -> None: ...
    def candidate_done(self, candidate: Candidate) -> None: ...
    def new_best(self, candidate: Candidate) -> None: ...
    def usage(self, usage: Usage) -> None: ...
    def message(self, text: str) -> None: ...


class Best(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    candidate: str
    code: str
    ms: float
    spread_pct: float
    profile: Profile | None = None


class Outcome(BaseModel):
    run_id: str
    best: Best | None
    stop_reason: str
    error: str | None = None  # set when the run ended on a failure (e.g. the LLM endpoint), not a limit
    iterations: int
    usage: Usage


def run(config: RunConfig, run_id: str, *, problem: ProblemSpec, gpu: GPUSpec, proposer: Proposer,
        evaluator: Evaluator, profiler: Profiler, store, progress: Progress) -> Outcome:
    """Run (or resume) `run_id` until iterations, budget, patience or the stage ladder run out."""
    state = store.resume_state(run_id)
    best = best_from_store(store, state.best)
    usage = state.usage
    stage_name, reason = state.stage or _first_stage(config), "resumed" if state.stage else "requested"
    # A resumed run's next prompt carries the same feedback it would have had without the interruption.
    last_results = round_results(store, run_id, state.last_iteration) if state.last_iteration >= 1 else []
    stale = 0
    visited = {it.stage for it in store.iterations(run_id)}
    stop, error = f"completed {config.iterations} iterations", None

    if state.last_iteration < 0:  # iteration 0: the starting kernel is the first current best
        stage = get_stage(stage_name)
        start = starting_code(problem)
        if start is not None:
            progress.start_iteration(0, stage.name, "starting kernel")
            store.record_iteration(run_id, 0, stage.name, "", "starting kernel", None)
            [result] = evaluator.evaluate([start], stage)
            cand = _record(store, run_id, 0, 0, stage.name, "", Answer(text=start, model="start"), result)
            progress.candidate_done(cand)
            best = _best_of_round([cand], best, profiler, stage, store, progress)
            store.end_iteration(run_id, 0)
        state.last_iteration = 0
    done = state.last_iteration

    for iteration in range(state.last_iteration + 1, config.iterations + 1):
        if config.stage == "auto":
            chosen, reason = choose_stage(stage_name, visited, best, stale, config.patience)
            if chosen is None:
                stop = reason
                break
            if chosen != stage_name:
                stale = 0
            stage_name = chosen
        stage = get_stage(stage_name)
        visited.add(stage.name)
        prompt = iteration_prompt(stage, gpu, problem, best, last_results)
        progress.start_iteration(iteration, stage.name, reason)
        store.record_iteration(run_id, iteration, stage.name, prompt, reason, best.candidate if best else None)

        if isinstance(proposer, Observer):
            proposer.observe(stage.name, best.code if best else "", best.profile if best else None, last_results)
        try:
            answers = proposer.propose(prompt, config.samples)
        except StopRun as e:  # budget spent, replay exhausted: a normal end
            stop = e.message
            break
        except UserError as e:  # bad key, server gone: stop cleanly, keep what we have, and say it failed
            stop, error = e.message, e.message
            break
        for a in answers:
            usage = usage + a.usage
        progress.usage(usage)

        last_results = evaluator.evaluate([a.text for a in answers], stage)
        recorded = []
        for index, (answer, result) in enumerate(zip(answers, last_results), start=1):
            cand = _record(store, run_id, iteration, index, stage.name, prompt, answer, result)
            progress.candidate_done(cand)
            recorded.append(cand)
        new = _best_of_round(recorded, best, profiler, stage, store, progress)
        improved, best = new is not best, new
        store.end_iteration(run_id, iteration)
        stale = 0 if improved else stale + 1
        done = iteration
        if config.stage != "auto" and stale >= config.patience:
            stop = f"no improvement in {stale} iterations (patience {config.patience})"
            break

    store.finish_run(run_id, "failed" if error else "finished")
    return Outcome(run_id=run_id, best=best, stop_reason=stop, error=error, iterations=done, usage=usage)


# ---------------------------------------------------------------- decisions


NEXT_FOR = {  # what a converged stage's bottleneck calls for next, with why
    "latency-bound": ("parallelism", "too few warps in flight to hide memory latency"),
    "launch-bound": ("tuning", "kernels so short that launch and meta-parameters dominate"),
    "memory-bound": ("memory-access", "bandwidth-bound: make every byte count"),
    "compute-bound": ("algebraic", "arithmetic-bound: eliminate work"),
}
NEAR_PEAK_DRAM_PCT = 80.0  # past this, reordering accesses gains little: only moving fewer bytes helps


def choose_stage(current: str, visited: set[str], best: Best | None, stale: int, patience: int) -> tuple[str | None, str]:
    """Next stage for --stage auto: stay while a stage improves; once it stalls, follow the bottleneck."""
    if best is None:
        return "correctness", "no correct kernel yet"
    if current != "correctness" and stale < patience:
        return current, f"improving on {current}" if stale == 0 else f"{stale}/{patience} iterations without gain"
    ladder = [s.name for s in load_stages()]
    open_stages = [s for s in ladder if s not in visited and s != "correctness"]
    if not open_stages:
        return None, f"stage ladder exhausted (last: {current})"
    b = best.profile.bottleneck if best.profile else None
    if b is None:
        return open_stages[0], f"{current} stalled; no profile to classify, next on the ladder"
    wanted, why = NEXT_FOR.get(b.kind, (open_stages[0], "unclassified"))
    if b.kind == "memory-bound" and b.figures.get("dram_pct", 0.0) >= NEAR_PEAK_DRAM_PCT:
        wanted, why = "algebraic", f"DRAM at {b.figures['dram_pct']:.0f} % of peak: only moving fewer bytes helps"
    if wanted not in open_stages:
        wanted, why = open_stages[0], f"{why}, but {wanted} is done: next on the ladder"
    return wanted, f"{b.reason}: {why}"  # the reason starts with the kind and its figures


def _first_stage(config: RunConfig) -> str:
    return "memory-fusion" if config.stage == "auto" else config.stage


def _faster(result: EvalResult, best: Best | None) -> bool:
    if result.verdict != Verdict.CORRECT or result.timing is None:
        return False
    if best is None:
        return True
    t = result.timing
    noise = max(MIN_GAIN, (t.candidate_spread_pct + best.spread_pct) / 200)
    return t.candidate_ms < best.ms * (1 - noise)


def _best_of_round(cands: list[Candidate], best: Best | None, profiler: Profiler, stage: Stage, store,
                   progress: Progress) -> Best | None:
    """The round's fastest correct candidate, profiled, if it beats `best` beyond noise; else `best` unchanged.

    Only that one is profiled (an ncu run costs more than evaluating the whole round), unless ncu finds its
    timing impossible (agent.crosscheck): it is then rejected and the next fastest profiled instead.
    """
    faster = sorted((c for c in cands if _faster(c.result, best)), key=lambda c: c.result.timing.candidate_ms)
    for cand in faster[:3]:
        profile = profiler.profile(cand.code or "", stage, cand.id)
        if profile is not None:
            store.update_profile(cand.id, profile)
            cand = cand.model_copy(update={"profile": profile})
        doubt = timing_doubt(cand.result.timing, profile)
        if doubt is None:
            break
        # ncu saw the kernels from outside the candidate's process and they take longer than the harness said
        rejected = cand.result.model_copy(update={"verdict": Verdict.RULE_VIOLATION, "message": doubt, "timing": None})
        store.update_result(cand.id, rejected)
        progress.message(f"{cand.id}: {doubt}")
    else:
        return best
    store.set_best(cand.run_id, cand.id)
    progress.new_best(cand)
    t = cand.result.timing
    return Best(candidate=cand.id, code=cand.code or "", ms=t.candidate_ms, spread_pct=t.candidate_spread_pct,
                profile=profile)


def iteration_prompt(stage: Stage, gpu: GPUSpec, problem: ProblemSpec, best: Best | None,
                     last_results: list[EvalResult]) -> str:
    """The prompt of one iteration: the current best's code and metrics, and the last round's failures."""
    return render(PromptInput(
        stage=stage, gpu=gpu, code=best.code if best else (starting_code(problem) or ""),
        metrics=best.profile.table() if best and best.profile else {},
        feedback=_feedback(last_results), reference=problem.path.read_text(),
    ))


def _feedback(results: list[EvalResult]) -> list[Feedback]:
    """Last iteration's failures, compactly: the harness's message is what a model needs to fix it."""
    return [
        Feedback(candidate=f"#{i}", verdict=r.verdict, message=r.message.strip().splitlines()[0][:300] if r.message else "")
        for i, r in enumerate(results, start=1)
        if r.verdict != Verdict.CORRECT
    ][:6]


def _record(store, run_id: str, iteration: int, index: int, stage: str, prompt: str, answer: Answer,
            result: EvalResult) -> Candidate:
    cand = Candidate(id=store.candidate_id(run_id, iteration, index), run_id=run_id, iteration=iteration,
                     index=index, stage=stage, code=result.code, prompt=prompt, answer=answer, result=result)
    store.record_candidate(cand)
    return cand


def round_results(store, run_id: str, iteration: int) -> list[EvalResult]:
    """The results of `iteration`'s latest attempt, in index order: the feedback its next iteration was given."""
    latest = [c for c in store.candidates(run_id)
              if c.iteration == iteration and c.id == store.candidate_id(run_id, iteration, c.index)]
    return [c.result for c in sorted(latest, key=lambda c: c.index)]


def best_from_store(store, candidate_id: str | None) -> Best | None:
    """The recorded candidate `candidate_id` as a current best (None if it has no timing)."""
    if not candidate_id:
        return None
    c = store.get_candidate(candidate_id)
    if c.result.timing is None:
        return None
    return Best(candidate=c.id, code=c.code or "", ms=c.result.timing.candidate_ms,
                spread_pct=c.result.timing.candidate_spread_pct, profile=c.profile)
