"""The optimization loop: render → propose → evaluate → profile → record, one iteration at a time.

It receives its task and parts (built by agent.wiring) and reads top to bottom; the stage of each round is its task's
policy's (agent.ladder); every decision it takes (which stage, whether a candidate is the new best, why it stopped) is
recorded in the store. Over 400 lines: the steps and the decisions they take (a new best, a parent's profile, a
timing ncu contradicts) read together; what reads a run back from the store (best_from_store, round_results) could
move out first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from agent.crosscheck import timing_doubt
from agent.diagnosis import for_prompt
from agent.errors import UserError
from agent.memory import idea_of, lines, short_id
from agent.plural import count
from agent.prompts import iteration_prompt
from agent.protocols import Parts, Progress, ProposalContext, RunStore, RunTask, Step
from agent.rounds import as_finished
from agent.runconfig import RunConfig
from agent.schema import (Answer, Candidate, EvalResult, GPUSpec, Group, Objective, ProblemSpec, Profile, Stage,
                          Timing, Usage, Verdict)
from agent.search import Limits, SearchState
from agent.stages import get_stage
from agent.store.records import IterationRecord

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
    found_in: str | None = Field(default=None, description="the stage whose round found it (None: a starting kernel)")


class Outcome(BaseModel):
    run_id: str
    best: Best | None
    stop_reason: str
    error: str | None = None  # set when the run ended on a failure (e.g. the LLM endpoint), not a limit
    hint: str | None = None  # what to do about the error
    iterations: int
    usage: Usage


def run(task: RunTask, parts: Parts, store: RunStore, progress: Progress) -> Outcome:
    """Run (or resume) `task` until iterations, budgets, the proposer or the stage policy stop it."""
    ctx = _Ctx(task, task.run_id, task.config, task.problem, task.gpu, parts, store, progress)
    s = _State.of(ctx)
    if s.done < 0:
        _judge_starts(ctx, s)
    stop, error, hint = f"completed {count(task.config.iterations, 'iteration')}", None, None
    for iteration in range(s.done + 1, task.config.iterations + 1):
        k = s.limits.samples(task.config.samples)
        if (spent := s.limits.spent(k)) is not None:
            stop = spent
            break
        redo = _redo(s.records.get(iteration), k) if iteration == s.pending else None
        step = Step(s.records[iteration].stage) if redo else task.policy.next(s.stage, s.visited, s.best, s.stale)
        if step.stage is None:
            stop = step.reason or "stopped"
            break
        stage = _enter(ctx, s, step, iteration, redo, k)
        proposed = _propose(ctx, s.groups, s.search, s.last_results)
        if proposed.error is not None:  # bad key, server gone: stop cleanly, keep what we have, and say it failed
            stop, error, hint = proposed.error.message, proposed.error.message, proposed.error.hint
        elif proposed.stop:  # budget spent, replay exhausted: a normal end, after judging what came
            stop = proposed.stop
        if not proposed.answers and (error or proposed.stop):
            break
        s.usage = sum((a.usage for _, _, a in proposed.answers), s.usage)
        progress.usage(s.usage)
        _judge_round(ctx, s, iteration, proposed, stage)
        if proposed.stop or error:  # the proposer gave what it could and stops after this round
            break
        if (why := task.policy.stop_after(s.stale)) is not None:
            stop = why
            break
    store.finish_run(task.run_id, "failed" if error else "finished")
    return Outcome(run_id=task.run_id, best=s.best, stop_reason=stop, error=error, hint=hint, iterations=s.done,
                   usage=s.usage)


@dataclass
class _State:
    """Where a run stands, as the store records it at the start and the rounds move it on."""

    best: Best | None
    usage: Usage
    stage: str  # the stage of the last round
    opening: str  # the reason a round gives when its policy has none: "resumed" once after a resume, then "requested"
    done: int  # the last iteration finished (-1: not even the starting kernels)
    pending: int | None  # an interrupted iteration, asked again with its recorded groups
    records: dict[int, IterationRecord]
    visited: set[str]
    search: SearchState
    limits: Limits
    last_results: list[EvalResult]  # the last round's results: the next prompt's feedback
    stale: int = 0  # rounds since the last new best
    groups: list[Group] = field(default_factory=list)

    @classmethod
    def of(cls, ctx: _Ctx) -> _State:
        state = ctx.store.resume_state(ctx.run_id)
        records = {it.iteration: it for it in ctx.store.iterations(ctx.run_id)}
        search = SearchState.of(ctx.store.candidates(ctx.run_id), ctx.config.search, ctx.objective, ctx.config.beam)
        # A resumed run's next prompt carries the same feedback and memory it would have had without the interruption.
        last = round_results(ctx.store, ctx.run_id, state.last_iteration) if state.last_iteration >= 1 else []
        return cls(best=best_from_store(ctx.store, state.best, ctx.objective), usage=state.usage,
                   stage=state.stage or ctx.task.policy.first, opening="resumed" if state.stage else "requested",
                   done=state.last_iteration, pending=state.pending_iteration, records=records,
                   visited={it.stage for it in records.values()}, search=search,
                   limits=Limits.of(ctx.config, judged=sum(search.visits.values())), last_results=last)


def _judge_starts(ctx: _Ctx, s: _State) -> None:
    """Iteration 0: the starting answers; the fastest correct one is the first best. A start is where the run begins,
    not an answer to the first stage: one its rules refuse (torch.compile's kernels may keep an intermediate in memory
    that memory-fusion refuses) is judged again at the policy's floor, if it has one."""
    starts = ctx.parts.starter.answers(ctx.problem, ctx.progress)
    if starts:
        stage = get_stage(s.stage)
        why = "starting kernel" + ("s" if len(starts) > 1 else "")
        ctx.progress.start_iteration(0, stage.name, why)
        ctx.store.record_iteration(ctx.run_id, 0, stage.name, "", why, None)
        group = Group(parent=None, stage=stage.name, k=len(starts))
        _, s.best, judged = _judge(ctx, 0, [(group, None, a) for a in starts], s.best, stage)
        refused = [a for a, c in zip(starts, judged) if c.result.verdict == Verdict.RULE_VIOLATION]
        floor = ctx.task.policy.floor
        if s.best is None and refused and floor is not None and stage.name != floor:
            ctx.progress.message(f"no starting kernel meets {stage.name}'s rules: judged again at {floor}, "
                                 "the ladder's floor")
            again = Group(parent=None, stage=floor, k=len(refused))
            _, s.best, more = _judge(ctx, 0, [(again, None, a) for a in refused], s.best, get_stage(floor),
                                     offset=len(starts))
            judged = judged + more
        for candidate in judged:
            s.search.add(candidate)
    s.done = 0


def _enter(ctx: _Ctx, s: _State, step: Step, iteration: int, redo: list[Group] | None, k: int) -> Stage:
    """Begin an iteration at `step`'s stage: its groups (an interrupted round's again, else planned), shown and
    recorded before anything is proposed."""
    if step.stage != s.stage:
        s.stale = 0
    stage = get_stage(step.stage or s.stage)
    s.stage, reason, s.opening = stage.name, step.reason or s.opening, "requested"
    s.visited.add(stage.name)
    s.groups = redo or _plan(ctx, s.search, s.best, stage, k, iteration, s.last_results)
    ctx.progress.start_iteration(iteration, stage.name, reason)
    if ctx.config.search != "greedy":
        ctx.progress.message("parents: " + ", ".join(
            f"{short_id(g.parent, ctx.run_id) if g.parent else 'none'} ×{g.k}"
            + ("" if g.stage == stage.name else f" ({g.stage})") for g in s.groups))
    ctx.store.record_iteration(ctx.run_id, iteration, stage.name, s.groups[0].prompt, reason,
                               s.best.candidate if s.best else None, s.groups)
    return stage


def _judge_round(ctx: _Ctx, s: _State, iteration: int, proposed: _Proposed, stage: Stage) -> None:
    s.last_results, new, judged = _judge(ctx, iteration, proposed.answers, s.best, stage)
    for c in judged:
        s.search.add(c)
    s.limits.judged += len(judged)
    s.stale = 0 if new is not s.best else s.stale + 1
    s.best, s.done = new, iteration


@dataclass(frozen=True)
class _Ctx:
    """What every step of one run shares."""

    task: RunTask
    run_id: str
    config: RunConfig
    problem: ProblemSpec
    gpu: GPUSpec
    parts: Parts
    store: RunStore
    progress: Progress

    @property
    def objective(self) -> Objective:
        return self.config.objective


def _redo(record: IterationRecord | None, k: int) -> list[Group] | None:
    """An interrupted iteration's groups, if its attempt recorded them for a round of k samples."""
    groups = record.plan(k) if record is not None else []
    return groups if groups and sum(g.k for g in groups) == k else None


def _plan(ctx: _Ctx, search: SearchState, best: Best | None, stage: Stage, k: int, iteration: int,
          last_results: list[EvalResult]) -> list[Group]:
    """The round's groups (agent.search), each with its prompt. Beam and tree profile a parent the first time it is
    chosen (its prompt then has metrics and findings); one whose timing ncu contradicts is dropped and the round
    planned again."""
    while True:
        groups = search.plan(k, best.candidate if best else None, stage.name, ctx.task.policy.own_stages)
        if ctx.config.search == "greedy":
            break
        parents = list(dict.fromkeys(g.parent for g in groups if g.parent))
        _profile_together(ctx, search, parents)
        if all(_profiled(ctx, search, p) for p in parents):
            break
    memory = lines(search.remembered(before=iteration), ctx.run_id) if ctx.config.memory else []
    return [g.model_copy(update={"prompt": iteration_prompt(
        get_stage(g.stage), ctx.gpu, ctx.problem, best_from_store(ctx.store, g.parent, ctx.objective), last_results,
        ctx.config.diagnosis, memory, ctx.config.precision)}) for g in groups]


def _profile_together(ctx: _Ctx, search: SearchState, parents: list[str]) -> None:
    """Start every unprofiled parent's profile now, side by side (only ncu's replays hold the GPU alone): waiting for
    them one after another cost a round ~10 s per parent that had landed too late to be profiled ahead."""
    if not ctx.parts.profiler.enabled:
        return
    for candidate in parents:
        parent = best_from_store(ctx.store, candidate, ctx.objective)
        if parent is not None and parent.profile is None and candidate not in search.profiled:
            ctx.parts.profiler.ahead(parent.code, get_stage(search.nodes[candidate].stage), candidate)


def _profiled(ctx: _Ctx, search: SearchState, candidate: str) -> bool:
    """Profile a parent that has no profile yet (tried once per process); False if ncu contradicts its timing (it
    is then no parent; its verdict stays, as the prompts that already showed it saw it)."""
    parent = best_from_store(ctx.store, candidate, ctx.objective)
    if parent is None:
        return True
    profile = parent.profile
    if profile is None and ctx.parts.profiler.enabled and candidate not in search.profiled:
        search.profiled.add(candidate)
        ctx.progress.phase("profiling", candidate)
        profile = ctx.parts.profiler.profile(parent.code, get_stage(search.nodes[candidate].stage), candidate)
        if profile is not None:
            ctx.store.update_profile(candidate, profile)
    doubt = timing_doubt(parent.timing, profile) if parent.timing is not None else None
    if doubt is None:
        return True
    ctx.progress.message(f"{candidate}: {doubt}; not a parent")
    search.reject(candidate)
    return False


@dataclass
class _Proposed:
    """A round's answers, each with its group and parent; why the proposer stopped (a normal end) or failed."""

    answers: list[tuple[Group, Best | None, Answer]]
    stop: str | None = None
    error: UserError | None = None


def _propose(ctx: _Ctx, groups: list[Group], search: SearchState, last_results: list[EvalResult]) -> _Proposed:
    """One ProposalContext per group, with its own prompt and k, in order, the whole memory with each; the first group
    whose proposer stops or fails ends the round (what came before it is still judged)."""
    out = _Proposed(answers=[])
    for g in groups:
        parent = best_from_store(ctx.store, g.parent, ctx.objective)
        asked = ProposalContext(prompt=g.prompt, k=g.k, stage=g.stage, code=parent.code if parent else "",
                                profile=parent.profile if parent else None, results=last_results,
                                findings=for_prompt(parent.profile, parent.timing, limit=None) if parent else [],
                                parent=g.parent, memory=search.remembered())
        for_whom = f" for {short_id(g.parent, ctx.run_id)}" if len(groups) > 1 and g.parent else ""
        ctx.progress.phase("proposing", f"{g.k} answer{'s' if g.k != 1 else ''} from {ctx.parts.proposer.name}"
                                        f"{for_whom}")
        try:
            proposal = ctx.parts.proposer.propose(asked)
        except UserError as e:
            out.error = e
            return out
        out.answers += [(g, parent, a) for a in proposal.answers]
        if proposal.stop:
            out.stop = proposal.stop
            return out
    return out


def _judge(ctx: _Ctx, iteration: int, answers: list[tuple[Group, Best | None, Answer]], best: Best | None,
           stage: Stage, offset: int = 0) -> tuple[list[EvalResult], Best | None, list[Candidate]]:
    """Evaluate a round's answers (each in its group's stage), recording and showing each candidate as its verdict
    lands; profile a new best; the iteration ends recorded. Returns the results in index order, the best, and the
    candidates as finally recorded."""
    ctx.progress.phase("evaluating", total=len(answers))
    first = int(iteration > 0) + offset  # the starting kernel is #0; a second judging of iteration 0 follows it
    results: dict[int, EvalResult] = {}
    recorded = []
    stages = [get_stage(g.stage) for g, _, _ in answers]
    one_stage = stages if len({s.name for s in stages}) > 1 else stages[0] if stages else stage
    findings: dict[int, str | None] = {}  # per group: the parent's first finding, what its prompt asked to address
    landed: list[float] = []  # the round's times that beat the best so far, on the run's clock (_ahead)
    for g, p, _ in answers:
        if id(g) not in findings:
            found = for_prompt(p.profile, p.timing) if p else []
            findings[id(g)] = found[0].kind if found else None
    ctx.parts.profiler.prepare([a.text for _, _, a in answers], stages)  # ncu's runs start beside the evaluations
    for i, result in as_finished(ctx.parts.evaluator, [a.text for _, _, a in answers], one_stage):
        g, _, answer = answers[i]
        cand = Candidate(id=ctx.store.candidate_id(ctx.run_id, iteration, first + i), run_id=ctx.run_id,
                         iteration=iteration, index=first + i, stage=g.stage, code=result.code, prompt=g.prompt,
                         answer=answer, result=result, parent=g.parent, idea=idea_of(answer, result.code),
                         finding=findings[id(g)])
        ctx.store.record_candidate(cand)
        ctx.progress.candidate_done(cand)
        _ahead(ctx, cand, best, landed)
        results[i] = result
        recorded.append(cand)
    recorded.sort(key=lambda c: c.index)
    best, rejected = _best_of_round(ctx, recorded, best)
    ctx.store.end_iteration(ctx.run_id, iteration)
    final = [ctx.store.get_candidate(c.id) if c.id in rejected else c for c in recorded]
    return [results[i] for i in sorted(results)], best, final


def _ahead(ctx: _Ctx, cand: Candidate, best: Best | None, landed: list[float]) -> None:
    """As a verdict lands, start the profile the next prompts will want of it (the new best, a beam's parent) beside
    the round's other evaluations: a candidate faster than the best and among the round's `beam` fastest so far."""
    if not ctx.parts.profiler.enabled or not _faster(cand.result, best, ctx.objective) or cand.result.timing is None:
        return
    ms = cand.result.timing.clock(ctx.objective)[0]
    landed.append(ms)
    if sorted(landed).index(ms) < (1 if ctx.config.search == "greedy" else ctx.config.beam):
        ctx.parts.profiler.ahead(cand.code or "", get_stage(cand.stage), cand.id)


# ---------------------------------------------------------------- decisions


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


def _best_of_round(ctx: _Ctx, cands: list[Candidate], best: Best | None) -> tuple[Best | None, set[str]]:
    """The round's fastest correct candidate, profiled, if it beats `best` beyond noise; else `best` unchanged.

    Only that one is profiled (an ncu run costs more than evaluating the whole round), unless ncu finds its
    timing impossible (agent.crosscheck): it is then rejected (returned with the ids rejected) and the next fastest
    profiled instead.
    """
    store, progress = ctx.store, ctx.progress
    faster = sorted((c for c in cands if _faster(c.result, best, ctx.objective)),
                    key=lambda c: c.result.timing.clock(ctx.objective)[0] if c.result.timing else float("inf"))
    rejected: set[str] = set()
    for cand in faster[:3]:
        if ctx.parts.profiler.enabled:
            progress.phase("profiling", cand.id)
        profile = ctx.parts.profiler.profile(cand.code or "", get_stage(cand.stage), cand.id)
        if profile is not None:
            store.update_profile(cand.id, profile)
            cand = cand.model_copy(update={"profile": profile})
        timing = cand.result.timing
        assert timing is not None  # _faster kept only timed candidates
        doubt = timing_doubt(timing, profile)
        if doubt is None:
            break
        # ncu saw the kernels from outside the candidate's process and they take longer than the harness said
        rejected_result = cand.result.model_copy(update={"verdict": Verdict.RULE_VIOLATION, "message": doubt,
                                                         "timing": None})
        store.update_result(cand.id, rejected_result)
        rejected.add(cand.id)
        progress.message(f"{cand.id}: {doubt}")
    else:
        return best, rejected
    store.set_best(cand.run_id, cand.id)
    progress.new_best(cand)
    ms, spread = timing.clock(ctx.objective)
    return Best(candidate=cand.id, code=cand.code or "", ms=ms, spread_pct=spread, profile=profile, timing=timing,
                objective=ctx.objective, found_in=cand.stage if cand.iteration > 0 else None), rejected


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
                timing=c.result.timing, objective=objective, found_in=c.stage if c.iteration > 0 else None)
