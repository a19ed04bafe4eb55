"""The optimization loop: render → propose → evaluate → profile → record, one iteration at a time.

It receives its parts (built by agent.wiring) and reads top to bottom; every decision it takes
(which stage, whether a candidate is the new best, why it stopped) is recorded in the store.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from agent.crosscheck import timing_doubt
from agent.diagnosis import for_prompt
from agent.errors import UserError
from agent.hostbound import bottleneck
from agent.ncu.metadata import meta
from agent.problems import starting_code
from agent.prompts import PromptInput, render
from agent.protocols import Parts, Progress, ProposalContext, RunStore
from agent.rounds import as_finished
from agent.schema import (
    Answer,
    Candidate,
    EvalResult,
    Feedback,
    GPUSpec,
    Objective,
    ProblemSpec,
    Profile,
    RunConfig,
    Stage,
    Timing,
    Usage,
    Verdict,
)
from agent.stages import get_stage, load_stages

log = logging.getLogger(__name__)

# A new best must beat the old one by more than the two timings' mean spread ((p80 - p20) / median), and
# never by less than this floor: on an H100 repeated harness timings of one kernel agree within 0.2-0.4 %,
# and a GAP-kernel gain of ~6 µs on a 1.39 ms forward (0.4 %) is real (ncu confirms it).
MIN_GAIN = 0.003


class Best(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    candidate: str
    code: str
    ms: float = Field(description="on the run's objective (mJ per call where it is energy and was measured)")
    spread_pct: float
    profile: Profile | None = None
    timing: Timing | None = Field(default=None, description="both clocks, for the prompt and --stage auto")
    objective: Objective = "latency"


class Outcome(BaseModel):
    run_id: str
    best: Best | None
    stop_reason: str
    error: str | None = None  # set when the run ended on a failure (e.g. the LLM endpoint), not a limit
    hint: str | None = None  # what to do about the error
    iterations: int
    usage: Usage


def run(config: RunConfig, run_id: str, *, problem: ProblemSpec, gpu: GPUSpec, parts: Parts, store: RunStore,
        progress: Progress) -> Outcome:
    """Run (or resume) `run_id` until iterations, budget, patience or the stage ladder run out."""
    ctx = _Ctx(run_id=run_id, objective=config.objective, parts=parts, store=store, progress=progress)
    state = store.resume_state(run_id)
    best = best_from_store(store, state.best, config.objective)
    usage = state.usage
    stage_name, reason = state.stage or _first_stage(config), "resumed" if state.stage else "requested"
    # A resumed run's next prompt carries the same feedback it would have had without the interruption.
    last_results = round_results(store, run_id, state.last_iteration) if state.last_iteration >= 1 else []
    stale = 0
    visited = {it.stage for it in store.iterations(run_id)}
    stop, error, hint = f"completed {config.iterations} iterations", None, None

    if state.last_iteration < 0:  # iteration 0: the starting kernel is the first current best
        start = starting_code(problem)
        if start is not None:
            stage = get_stage(stage_name)
            progress.start_iteration(0, stage.name, "starting kernel")
            store.record_iteration(run_id, 0, stage.name, "", "starting kernel", None)
            _, best = _judge(ctx, 0, stage, "", [Answer(text=start, model="start")], best)
        state.last_iteration = 0
    done = state.last_iteration

    for iteration in range(state.last_iteration + 1, config.iterations + 1):
        if config.stage == "auto":
            chosen, reason = choose_stage(stage_name, visited, best, stale, config.patience, config.objective)
            if chosen is None:
                stop = reason
                break
            if chosen != stage_name:
                stale = 0
            stage_name = chosen
        stage = get_stage(stage_name)
        visited.add(stage.name)
        prompt = iteration_prompt(stage, gpu, problem, best, last_results, config.diagnosis)
        progress.start_iteration(iteration, stage.name, reason)
        store.record_iteration(run_id, iteration, stage.name, prompt, reason, best.candidate if best else None)
        if config.stage != "auto":  # "resumed" says why the first iteration after a resume runs, not the later ones
            reason = "requested"

        asked = ProposalContext(prompt=prompt, k=config.samples, stage=stage.name, code=best.code if best else "",
                                profile=best.profile if best else None, results=last_results,
                                findings=for_prompt(best.profile, best.timing, limit=None) if best else [])
        progress.phase("proposing", f"{config.samples} answer{'s' if config.samples != 1 else ''} from "
                                    f"{parts.proposer.name}")
        try:
            proposal = parts.proposer.propose(asked)
        except UserError as e:  # bad key, server gone: stop cleanly, keep what we have, and say it failed
            stop, error, hint = e.message, e.message, e.hint
            break
        answers = proposal.answers
        if proposal.stop and not answers:  # budget spent, replay exhausted: a normal end
            stop = proposal.stop
            break
        for a in answers:
            usage = usage + a.usage
        progress.usage(usage)

        last_results, new = _judge(ctx, iteration, stage, prompt, answers, best)
        stale = 0 if new is not best else stale + 1
        best = new
        done = iteration
        if proposal.stop:  # the proposer gave what it could and stops after this round
            stop = proposal.stop
            break
        if config.stage != "auto" and stale >= config.patience:
            stop = f"no improvement in {stale} iterations (patience {config.patience})"
            break

    store.finish_run(run_id, "failed" if error else "finished")
    return Outcome(run_id=run_id, best=best, stop_reason=stop, error=error, hint=hint, iterations=done, usage=usage)


@dataclass(frozen=True)
class _Ctx:
    """What every step of one run shares."""

    run_id: str
    objective: Objective
    parts: Parts
    store: RunStore
    progress: Progress


def _judge(ctx: _Ctx, iteration: int, stage: Stage, prompt: str, answers: list[Answer],
           best: Best | None) -> tuple[list[EvalResult], Best | None]:
    """Evaluate a round's answers, recording and showing each candidate as its verdict lands; profile a new best;
    the iteration ends recorded."""
    ctx.progress.phase("evaluating", total=len(answers))
    first = int(iteration > 0)  # the starting kernel is #0
    results: dict[int, EvalResult] = {}
    recorded = []
    for i, result in as_finished(ctx.parts.evaluator, [a.text for a in answers], stage):
        cand = _record(ctx.store, ctx.run_id, iteration, first + i, stage.name, prompt, answers[i], result)
        ctx.progress.candidate_done(cand)
        results[i] = result
        recorded.append(cand)
    recorded.sort(key=lambda c: c.index)
    best = _best_of_round(ctx, recorded, best, stage)
    ctx.store.end_iteration(ctx.run_id, iteration)
    return [results[i] for i in sorted(results)], best


# ---------------------------------------------------------------- decisions


NEXT_FOR = {  # what a converged stage's bottleneck calls for next, with why
    "latency-bound": ("parallelism", "too few warps in flight to hide memory latency"),
    "launch-bound": ("tuning", "kernels so short that launch and meta-parameters dominate"),
    "memory-bound": ("memory-access", "bandwidth-bound: make every byte count"),
    "compute-bound": ("algebraic", "arithmetic-bound: eliminate work"),
    "host-bound": ("host-overhead", "the GPU waits for Python: fewer launches and less host work per call"),
}


def choose_stage(current: str, visited: set[str], best: Best | None, stale: int, patience: int,
                 objective: Objective = "latency") -> tuple[str | None, str]:
    """Next stage for --stage auto: stay while a stage improves; once it stalls, follow the bottleneck (host-bound,
    from the two clocks, first when the run optimizes latency)."""
    if best is None:
        return "correctness", "no correct kernel yet"
    if current != "correctness" and stale < patience:
        return current, f"improving on {current}" if stale == 0 else f"{stale}/{patience} iterations without gain"
    b = bottleneck(best.profile, best.timing, objective)
    open_stages = [s.name for s in load_stages() if s.name not in visited and s.name != "correctness"
                   and (s.entered_for is None or (b is not None and b.kind == s.entered_for))]
    if not open_stages:
        return None, f"stage ladder exhausted (last: {current})"
    if b is None:
        return open_stages[0], f"{current} stalled; no profile to classify, next on the ladder"
    wanted, why = NEXT_FOR.get(b.kind, (open_stages[0], "unclassified"))
    if b.kind == "memory-bound" and b.figures.get("dram_pct", 0.0) >= meta().bottleneck.near_peak_dram_pct:
        wanted, why = "algebraic", f"DRAM at {b.figures['dram_pct']:.0f} % of peak: only moving fewer bytes helps"
    if wanted not in open_stages:
        wanted, why = open_stages[0], f"{why}, but {wanted} is done: next on the ladder"
    return wanted, f"{b.reason}: {why}"  # the reason starts with the kind and its figures


def _first_stage(config: RunConfig) -> str:
    return "memory-fusion" if config.stage == "auto" else config.stage


def _faster(result: EvalResult, best: Best | None, objective: Objective) -> bool:
    """Correct, timed, and faster than the best on the run's clock by more than both spreads (and MIN_GAIN)."""
    if result.verdict != Verdict.CORRECT or result.timing is None:
        return False
    if best is None:
        return True
    ms, spread = result.timing.clock(objective)
    theirs, their_spread = best.ms, best.spread_pct
    if best.timing is not None and best.timing.ranks_by(objective) != result.timing.ranks_by(objective):
        # energy measured for one of them only: compare what both have, never mJ with ms
        (ms, spread), (theirs, their_spread) = result.timing.clock("latency"), best.timing.clock("latency")
    noise = max(MIN_GAIN, (spread + their_spread) / 200)
    return ms < theirs * (1 - noise)


def _best_of_round(ctx: _Ctx, cands: list[Candidate], best: Best | None, stage: Stage) -> Best | None:
    """The round's fastest correct candidate, profiled, if it beats `best` beyond noise; else `best` unchanged.

    Only that one is profiled (an ncu run costs more than evaluating the whole round), unless ncu finds its
    timing impossible (agent.crosscheck): it is then rejected and the next fastest profiled instead.
    """
    store, progress = ctx.store, ctx.progress
    faster = sorted((c for c in cands if _faster(c.result, best, ctx.objective)),
                    key=lambda c: c.result.timing.clock(ctx.objective)[0] if c.result.timing else float("inf"))
    for cand in faster[:3]:
        if ctx.parts.profiler.enabled:
            progress.phase("profiling", cand.id)
        profile = ctx.parts.profiler.profile(cand.code or "", stage, cand.id)
        if profile is not None:
            store.update_profile(cand.id, profile)
            cand = cand.model_copy(update={"profile": profile})
        timing = cand.result.timing
        assert timing is not None  # _faster kept only timed candidates
        doubt = timing_doubt(timing, profile)
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
    ms, spread = timing.clock(ctx.objective)
    return Best(candidate=cand.id, code=cand.code or "", ms=ms, spread_pct=spread, profile=profile, timing=timing,
                objective=ctx.objective)


def iteration_prompt(stage: Stage, gpu: GPUSpec, problem: ProblemSpec, best: Best | None,
                     last_results: list[EvalResult], diagnosis: bool = False) -> str:
    """The prompt of one iteration: the current best's code, metrics and (with `diagnosis`) findings, and the last
    round's failures."""
    return render(PromptInput(
        stage=stage, gpu=gpu, code=best.code if best else (starting_code(problem) or ""),
        metrics=best.profile.table() if best and best.profile else {},
        feedback=_feedback(last_results), reference=problem.path.read_text(),
        timing=best.timing if best else None, objective=best.objective if best else "latency",
        diagnosis=for_prompt(best.profile, best.timing) if diagnosis and best else [],
    ))


def _feedback(results: list[EvalResult]) -> list[Feedback]:
    """Last iteration's failures, compactly: the harness's message is what a model needs to fix it."""
    return [
        Feedback(candidate=f"#{i}", verdict=r.verdict, message=r.message.strip().splitlines()[0][:300] if r.message else "")
        for i, r in enumerate(results, start=1)
        if r.verdict != Verdict.CORRECT
    ][:6]


def _record(store: RunStore, run_id: str, iteration: int, index: int, stage: str, prompt: str, answer: Answer,
            result: EvalResult) -> Candidate:
    cand = Candidate(id=store.candidate_id(run_id, iteration, index), run_id=run_id, iteration=iteration,
                     index=index, stage=stage, code=result.code, prompt=prompt, answer=answer, result=result)
    store.record_candidate(cand)
    return cand


def round_results(store: RunStore, run_id: str, iteration: int) -> list[EvalResult]:
    """The results of `iteration`'s latest attempt, in index order: the feedback its next iteration was given."""
    latest = [c for c in store.candidates(run_id)
              if c.iteration == iteration and c.id == store.candidate_id(run_id, iteration, c.index)]
    return [c.result for c in sorted(latest, key=lambda c: c.index)]


def best_from_store(store: RunStore, candidate_id: str | None, objective: Objective = "latency") -> Best | None:
    """The recorded candidate `candidate_id` as a current best on `objective`'s clock (None if it has no timing)."""
    if not candidate_id:
        return None
    c = store.get_candidate(candidate_id)
    if c.result.timing is None:
        return None
    ms, spread = c.result.timing.clock(objective)
    return Best(candidate=c.id, code=c.code or "", ms=ms, spread_pct=spread, profile=c.profile,
                timing=c.result.timing, objective=objective)
