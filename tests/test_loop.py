"""The optimization loop (agent.loop) as a specification.

Real parts where they are cheap: a real Store in tmp_path, the real ReplayProposer (and the real OpenAIProposer
against the fake server for the budget), real prompts. The evaluator and profiler are test doubles of the loop's
Evaluator/Profiler protocols: they answer each source with a result the test chose, so the loop's decisions (new
best only beyond noise, patience, feedback, stage choice) are tested in milliseconds. One test runs the real harness
in CPU mode for one iteration.
"""

from __future__ import annotations

import time

import json
from pathlib import Path

import pytest

from agent import loop
from agent.catalog import find_gpu
from agent.harness.evaluator import LocalEvaluator, RoundRequests
from agent.llm import Budget, OpenAIConfig, OpenAIProposer, ReplayProposer
from agent.config import ModelPrice, UserConfig
from agent.llm.pricing import Price
from agent.ladder import choose_stage, policy_of
from agent.loop import MIN_GAIN, Best
from agent.problems import load_problem
from agent.profiler import NcuProfiler
from agent.protocols import Parts, Proposal, ProposalContext, RunTask
from agent.rerender import rerender_run
from agent.scale.placement import Placement
from agent.runconfig import RunConfig
from agent.schema import (
    Answer,
    ProblemSpec,
    Bottleneck,
    Candidate,
    EvalResult,
    KernelProfile,
    Profile,
    Stage,
    Timing,
    Usage,
    Verdict,
)
from agent.stages import ladder
from agent.starts import Starts
from agent.store import Store
from agent.wiring import Assembly, CallLog, build_proposer


def assembly(store: Store, config: RunConfig, resumed: str | None = None) -> Assembly:
    return Assembly(config=config, problem=PROBLEM, gpu=GPU, store=store, placement=Placement(device=config.device),
                    run_id=resumed, resumed=resumed)
from fake_openai import reply

ANSWERS = Path(__file__).resolve().parent / "answers"
FEEDBACK_HEADER = "[FEEDBACK FROM PREVIOUS ATTEMPTS]"


# ---------------------------------------------------------------- test doubles of the loop's protocols


def correct(ms: float, spread_pct: float = 0.5) -> EvalResult:
    return EvalResult(verdict=Verdict.CORRECT, message="", timing=Timing(
        candidate_ms=ms, candidate_spread_pct=spread_pct, eager_ms=20.0, speedup_vs_eager=20.0 / ms, repeats=50,
        meaningful=True))


def failed(verdict: Verdict, message: str) -> EvalResult:
    return EvalResult(verdict=verdict, message=message)


def answer(name: str) -> Answer:
    """A proposal whose text names the result the TableEvaluator gives it (`# kernel: NAME`)."""
    code = f"# kernel: {name}\nclass ModelNew:\n    pass\n"
    return Answer(text=f"Try this.\n```python\n{code}```\n", model="hand-written",
                  usage=Usage(prompt_tokens=100, completion_tokens=40, cost_usd=0.001))


class TableEvaluator:
    """Evaluator: a source's result is looked up by its `# kernel: NAME` marker; the starting kernel gets `start`."""

    def __init__(self, results: dict[str, EvalResult], start: EvalResult | None = None) -> None:
        self.results = results
        self.start = start or correct(10.0)
        self.rounds: list[tuple[str, list[str]]] = []

    def evaluate(self, sources: list[str], stage: Stage, on_result=None) -> list[EvalResult]:
        self.rounds.append((stage.name, list(sources)))
        return [self._result(s) for s in sources]

    def _result(self, source: str) -> EvalResult:
        for line in source.splitlines():
            if line.startswith("# kernel: "):
                result = self.results[line.removeprefix("# kernel: ").strip()]
                break
        else:
            result = self.start
        code = source if result.verdict == Verdict.CORRECT else None
        return result.model_copy(update={"code": code})


class Killed(BaseException):
    """What a SIGKILL looks like from inside: the loop stops wherever it is (not an Exception: nothing catches it)."""


class KillingEvaluator(TableEvaluator):
    def __init__(self, *args, kill_at_round: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kill_at_round = kill_at_round

    def evaluate(self, sources: list[str], stage: Stage, on_result=None) -> list[EvalResult]:
        if len(self.rounds) + 1 == self.kill_at_round:
            raise Killed()
        return super().evaluate(sources, stage, on_result)


def profile_of(kind: str | None, dram_pct: float = 30.0) -> Profile | None:
    if kind is None:
        return None
    return Profile(gpu="4090", kernels={"gap_kernel": KernelProfile(name="gap_kernel", metrics={
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": dram_pct, "launch__grid_size": 32})},
        bottleneck=Bottleneck(kind=kind, reason=f"{kind}: DRAM {dram_pct:.0f} %", figures={"dram_pct": dram_pct}))


class FixedProfiler:
    """Profiler: the same profile for every kernel; records which candidates it was asked to profile."""

    def __init__(self, profile: Profile | None = None) -> None:
        self.result = profile
        self.calls: list[str] = []

    enabled = True

    def ahead(self, code: str, stage: Stage, candidate_id: str) -> None:
        self.asked_ahead = [*getattr(self, "asked_ahead", []), candidate_id]

    def prepare(self, answers: list[str], stages: list[Stage]) -> None:
        self.prepared = [*getattr(self, "prepared", []), len(answers)]

    def profile(self, code: str, stage: Stage, candidate_id: str) -> Profile | None:
        self.calls.append(candidate_id)
        return self.result


class RecordingProposer:
    """A ReplayProposer that also keeps the prompts it was sent."""

    def __init__(self, answers: list[Answer]) -> None:
        self.inner = ReplayProposer(answers, name="replay:test")
        self.name = self.inner.name
        self.prompts: list[str] = []

    def propose(self, ctx: ProposalContext) -> Proposal:
        self.prompts.append(ctx.prompt)
        return self.inner.propose(ctx)


class Events:
    """Progress: every event the loop reports, in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def start_iteration(self, iteration: int, stage: str, reason: str) -> None:
        self.events.append(("iteration", iteration, stage, reason))

    def phase(self, name: str, detail: str = "", total: int = 0) -> None:
        self.events.append(("phase", name, total))

    def candidate_done(self, candidate: Candidate) -> None:
        self.events.append(("candidate", candidate.id, str(candidate.result.verdict)))

    def new_best(self, candidate: Candidate) -> None:
        self.events.append(("best", candidate.id))

    def usage(self, usage: Usage) -> None:
        self.events.append(("usage", usage.cost_usd))

    def message(self, text: str) -> None:
        self.events.append(("message", text))

    def bests(self) -> list[str]:
        return [e[1] for e in self.events if e[0] == "best"]


# ---------------------------------------------------------------- fixtures and helpers


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with Store(tmp_path) as s:
        yield s


PROBLEM = load_problem("gap44")
GPU = find_gpu("4090")


def new_run(store: Store, **overrides) -> tuple[RunConfig, str]:
    config = RunConfig(**{"device": "cpu", "llm": "replay:test", "iterations": 2, "samples": 2, "patience": 3,
                          **overrides})
    return config, store.create_run(config, gpu=GPU.name, device="cpu")


def task(config: RunConfig, run_id: str, problem: ProblemSpec = PROBLEM) -> RunTask:
    return RunTask(run_id=run_id, config=config, problem=problem, gpu=GPU,
                   policy=policy_of(config.stage, config.patience, config.objective))


def go(store: Store, config: RunConfig, run_id: str, proposer, evaluator, profiler=None, progress=None) -> loop.Outcome:
    parts = Parts(proposer=proposer, evaluator=evaluator, profiler=profiler or FixedProfiler(), starter=Starts("problem"))
    outcome = loop.run(task(config, run_id, PROBLEM), parts, store, progress or Events())
    assert outcome.run_id == run_id
    return outcome


def cid(run_id: str, iteration: int, index: int) -> str:
    return f"{run_id}-i{iteration}-c{index}"


# ---------------------------------------------------------------- iteration 0 and the current best


def test_iteration_zero_evaluates_the_starting_kernel_and_makes_it_the_first_best(store):
    config, run_id = new_run(store, iterations=0)
    evaluator, profiler, events = TableEvaluator({}), FixedProfiler(profile_of("latency-bound")), Events()

    outcome = go(store, config, run_id, RecordingProposer([]), evaluator, profiler, events)

    assert evaluator.rounds == [("memory-fusion", [PROBLEM.start.read_text()])]
    assert outcome.best is not None and outcome.best.candidate == cid(run_id, 0, 0)
    assert outcome.best.profile is not None and outcome.best.profile.bottleneck.kind == "latency-bound"
    assert profiler.calls == [cid(run_id, 0, 0)]
    assert events.bests() == [cid(run_id, 0, 0)]
    assert outcome.stop_reason == "completed 0 iterations" and outcome.iterations == 0
    run = store.get_run(run_id)
    assert run.best == cid(run_id, 0, 0) and run.status == "finished"
    start = store.get_candidate(cid(run_id, 0, 0))
    assert start.answer.model == "start" and start.result.verdict == Verdict.CORRECT
    assert start.profile is not None  # the profile is recorded with the candidate
    [it0] = store.iterations(run_id)
    assert (it0.iteration, it0.reason, it0.prompt, it0.completed) == (0, "starting kernel", "", True)


class FixedStarter:
    """Starter: the same answers every time (iteration 0's), e.g. the problem's kernel and torch.compile's."""

    def __init__(self, answers: list[Answer]) -> None:
        self.given = answers

    def answers(self, problem, progress) -> list[Answer]:
        return list(self.given)


def test_iteration_zero_judges_every_starting_answer_and_the_fastest_correct_one_is_the_first_best(store):
    config, run_id = new_run(store, iterations=0)
    starts = [Answer(text="# kernel: problem\n", model="start"), Answer(text="# kernel: inductor\n", model="inductor")]
    evaluator = TableEvaluator({"problem": correct(10.0), "inductor": correct(4.0)})
    parts = Parts(proposer=RecordingProposer([]), evaluator=evaluator, profiler=FixedProfiler(),
                  starter=FixedStarter(starts))

    outcome = loop.run(task(config, run_id, PROBLEM), parts, store, Events())

    assert evaluator.rounds == [("memory-fusion", ["# kernel: problem\n", "# kernel: inductor\n"])]
    assert outcome.best is not None and outcome.best.candidate == cid(run_id, 0, 1)
    assert store.get_candidate(cid(run_id, 0, 1)).answer.model == "inductor"
    [it0] = store.iterations(run_id)
    assert (it0.iteration, it0.reason) == (0, "starting kernels")


class StageEvaluator(TableEvaluator):
    """Refuses `# kernel: NAME` answers at the stages in `refuse` (a stage rule), else the table's result."""

    def __init__(self, results: dict[str, EvalResult], refuse: set[str]) -> None:
        super().__init__(results)
        self.refuse = refuse

    def evaluate(self, sources, stage, on_result=None):
        results = super().evaluate(sources, stage)
        if stage.name in self.refuse:
            results = [failed(Verdict.RULE_VIOLATION, f"breaks {stage.name}'s rules") for _ in results]
        for i, r in enumerate(results):
            if on_result is not None:
                on_result(i, r)
        return results


def test_with_stage_auto_a_start_refused_by_the_first_stages_rules_is_judged_again_at_the_ladders_floor(store):
    config, run_id = new_run(store, iterations=0, stage="auto")
    starts = [Answer(text="# kernel: inductor\n", model="inductor")]
    evaluator = StageEvaluator({"inductor": correct(4.0)}, refuse={"memory-fusion"})
    parts = Parts(proposer=RecordingProposer([]), evaluator=evaluator, profiler=FixedProfiler(),
                  starter=FixedStarter(starts))
    events = Events()

    outcome = loop.run(task(config, run_id, PROBLEM), parts, store, events)

    assert [stage for stage, _ in evaluator.rounds] == ["memory-fusion", "correctness"]
    assert outcome.best is not None and outcome.best.candidate == cid(run_id, 0, 1)
    refused, admitted = store.get_candidate(cid(run_id, 0, 0)), store.get_candidate(cid(run_id, 0, 1))
    assert (refused.stage, refused.result.verdict) == ("memory-fusion", Verdict.RULE_VIOLATION)
    assert (admitted.stage, admitted.result.verdict, admitted.answer.model) == ("correctness", Verdict.CORRECT,
                                                                                 "inductor")
    assert any(e[0] == "message" and "judged again at correctness" in str(e[1]) for e in events.events)


def test_a_named_stage_keeps_its_rules_for_the_starts_too(store):
    config, run_id = new_run(store, iterations=0, stage="memory-fusion")
    evaluator = StageEvaluator({"inductor": correct(4.0)}, refuse={"memory-fusion"})
    parts = Parts(proposer=RecordingProposer([]), evaluator=evaluator, profiler=FixedProfiler(),
                  starter=FixedStarter([Answer(text="# kernel: inductor\n", model="inductor")]))

    outcome = loop.run(task(config, run_id, PROBLEM), parts, store, Events())

    assert [stage for stage, _ in evaluator.rounds] == ["memory-fusion"] and outcome.best is None


def test_no_starting_answer_means_no_iteration_zero(store):
    config, run_id = new_run(store, iterations=0)
    evaluator = TableEvaluator({})
    parts = Parts(proposer=RecordingProposer([]), evaluator=evaluator, profiler=FixedProfiler(),
                  starter=FixedStarter([]))

    outcome = loop.run(task(config, run_id, PROBLEM), parts, store, Events())

    assert evaluator.rounds == [] and outcome.best is None and store.iterations(run_id) == []


class LandingEvaluator(TableEvaluator):
    """Reports a round's second answer first and holds the first back until the loop has shown the second: a loop
    that waited for the whole round would never see it (the round times out)."""

    def __init__(self, events: Events, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.events = events
        self.waited = False

    def evaluate(self, sources, stage, on_result=None):
        results = super().evaluate(sources, stage)
        if len(sources) < 2 or on_result is None:
            return results
        on_result(1, results[1])
        deadline = time.monotonic() + 10
        while not any(e[0] == "candidate" and e[1].endswith("-c2") for e in self.events.events):
            assert time.monotonic() < deadline, "the loop did not show the candidate that had landed"
            time.sleep(0.01)
        self.waited = True
        on_result(0, results[0])
        return results


def test_the_loop_shows_and_records_each_candidate_as_it_lands_and_announces_its_phases(store):
    config, run_id = new_run(store, iterations=1, samples=2)
    events = Events()
    evaluator = LandingEvaluator(events, {"a": correct(9.0), "b": failed(Verdict.INCORRECT, "wrong")})
    outcome = go(store, config, run_id, RecordingProposer([answer("a"), answer("b")]), evaluator,
                 FixedProfiler(profile_of("memory-bound")), events)
    assert evaluator.waited
    landed = [e[1] for e in events.events if e[0] == "candidate"]
    assert landed == [cid(run_id, 0, 0), cid(run_id, 1, 2), cid(run_id, 1, 1)]  # in the order they landed
    kinds = [e[0] if e[0] != "phase" else f"phase:{e[1]}" for e in events.events]
    assert kinds == ["iteration", "phase:evaluating", "candidate", "phase:profiling", "best",
                     "iteration", "phase:proposing", "usage", "phase:evaluating", "candidate", "candidate",
                     "phase:profiling", "best"]
    assert outcome.best is not None and outcome.best.candidate == cid(run_id, 1, 1)
    # the next prompt's feedback is in index order whatever the landing order
    assert [c.index for c in store.candidates(run_id) if c.iteration == 1] == [1, 2]


def test_a_new_best_must_beat_the_old_one_beyond_noise(store):
    config, run_id = new_run(store, iterations=2, samples=2)
    assert MIN_GAIN < 0.05
    evaluator = TableEvaluator({
        "within-min-gain": correct(10.0 * (1 - MIN_GAIN / 2), spread_pct=0.0),  # less than the floor: noise
        "within-spreads": correct(9.5, spread_pct=30.0),  # 5 % faster, but its timing spreads over 30 %
        "clearly-faster": correct(9.0, spread_pct=0.2),  # 10 % faster, tight spreads
        "slower": correct(11.0),
    }, start=correct(10.0, spread_pct=0.0))
    proposer = RecordingProposer([answer("within-min-gain"), answer("within-spreads"),
                                  answer("slower"), answer("clearly-faster")])
    profiler, events = FixedProfiler(), Events()

    outcome = go(store, config, run_id, proposer, evaluator, profiler, events)

    assert outcome.best.candidate == cid(run_id, 2, 2) and outcome.best.ms == 9.0
    assert events.bests() == [cid(run_id, 0, 0), cid(run_id, 2, 2)]
    assert profiler.calls == [cid(run_id, 0, 0), cid(run_id, 2, 2)]  # only new bests are profiled
    assert [it.best_before for it in store.iterations(run_id)] == [None, cid(run_id, 0, 0), cid(run_id, 0, 0)]
    assert store.get_run(run_id).best == cid(run_id, 2, 2)


def test_only_the_fastest_new_candidate_of_a_round_is_profiled(store):
    config, run_id = new_run(store, iterations=1, samples=3)
    evaluator = TableEvaluator({"fast": correct(8.0), "faster": correct(7.0), "wrong": failed(
        Verdict.INCORRECT, "incorrect in 6 of 6 trials")})
    profiler, events = FixedProfiler(profile_of("memory-bound", 85.0)), Events()

    outcome = go(store, config, run_id, RecordingProposer([answer("fast"), answer("faster"), answer("wrong")]),
                 evaluator, profiler, events)

    assert profiler.calls == [cid(run_id, 0, 0), cid(run_id, 1, 2)]
    assert events.bests() == [cid(run_id, 0, 0), cid(run_id, 1, 2)]
    assert outcome.best.candidate == cid(run_id, 1, 2)
    # every candidate is recorded, with its verdict, whether or not it became the best
    assert [(c.id, c.result.verdict) for c in store.candidates(run_id)] == [
        (cid(run_id, 0, 0), "correct"), (cid(run_id, 1, 1), "correct"), (cid(run_id, 1, 2), "correct"),
        (cid(run_id, 1, 3), "incorrect")]
    assert store.get_candidate(cid(run_id, 1, 2)).profile.bottleneck.kind == "memory-bound"


class DurationProfiler(FixedProfiler):
    """Profiler: the candidate's kernels take `ms[candidate]` under ncu (gpu__time_duration.sum, in ns)."""

    def __init__(self, ms: dict[str, float]) -> None:
        super().__init__()
        self.ms = ms

    enabled = True

    def profile(self, code: str, stage: Stage, candidate_id: str) -> Profile | None:
        self.calls.append(candidate_id)
        name = next((n for n in self.ms if f"# kernel: {n}" in code), None)
        ms = self.ms.get(name, 1.0)
        return Profile(gpu="4090", kernels={"k": KernelProfile(name="k", metrics={"gpu__time_duration.sum": ms * 1e6})})


def test_a_best_whose_timing_ncu_contradicts_is_rejected_and_the_next_one_profiled(store):
    config, run_id = new_run(store, iterations=1, samples=2)
    evaluator = TableEvaluator({"forged": correct(0.03), "honest": correct(7.0)})
    profiler, events = DurationProfiler({"forged": 9.0, "honest": 6.5}), Events()

    outcome = go(store, config, run_id, RecordingProposer([answer("forged"), answer("honest")]), evaluator, profiler, events)

    assert profiler.calls == [cid(run_id, 0, 0), cid(run_id, 1, 1), cid(run_id, 1, 2)]
    assert outcome.best.candidate == cid(run_id, 1, 2)
    forged = store.get_candidate(cid(run_id, 1, 1))
    assert forged.result.verdict == Verdict.RULE_VIOLATION and "timing not reproducible" in forged.result.message
    assert forged.result.timing is None
    row = next(r for r in store.leaderboard(run=run_id, include_all=True) if r.candidate == cid(run_id, 1, 1))
    assert row.verdict == "rule_violation"


def test_patience_stops_a_run_without_improvement(store):
    config, run_id = new_run(store, iterations=5, samples=1, patience=2)
    evaluator = TableEvaluator({"slower": correct(12.0)})

    outcome = go(store, config, run_id, RecordingProposer([answer("slower")] * 5), evaluator)

    assert outcome.stop_reason == "no improvement in 2 iterations (patience 2)"
    assert outcome.iterations == 2 and len(evaluator.rounds) == 3  # the start, then two rounds
    assert outcome.best.candidate == cid(run_id, 0, 0)
    run = store.get_run(run_id)
    assert (run.status, run.iterations, run.candidates) == ("finished", 2, 3)


# ---------------------------------------------------------------- prompts and feedback


def test_the_last_rounds_failures_are_the_next_prompts_feedback(store):
    config, run_id = new_run(store, iterations=2, samples=3)
    evaluator = TableEvaluator({
        "wrong": failed(Verdict.INCORRECT, "incorrect in 6 of 6 trials; worst: size cpu\nTraceback details"),
        "prose": failed(Verdict.NO_CODE, "no ```python code block found: answer with one block"),
        "slower": correct(11.0),
    })
    proposer = RecordingProposer([answer("wrong"), answer("prose"), answer("slower")] * 2)

    go(store, config, run_id, proposer, evaluator)

    first, second = proposer.prompts
    assert FEEDBACK_HEADER not in first  # nothing failed before iteration 1
    feedback = second[second.index(FEEDBACK_HEADER):]
    assert "- #1: incorrect" in feedback and "incorrect in 6 of 6 trials; worst: size cpu" in feedback
    assert "Traceback details" not in feedback  # compact: the first line of each message
    assert "- #2: no_code" in feedback and "no ```python code block found" in feedback
    assert "#3" not in feedback  # correct candidates are not feedback
    # the prompt the proposer got is the one recorded, and replaying the run re-renders it byte for byte
    assert [it.prompt for it in store.iterations(run_id)][1:] == proposer.prompts
    assert [r.matches for r in rerender_run(store, run_id)] == [True, True]


def test_with_diagnosis_on_the_prompt_says_what_the_bests_profile_means_and_rerenders_identically(store):
    config, run_id = new_run(store, iterations=2, samples=1, diagnosis=True)
    evaluator = TableEvaluator({"faster": correct(8.0), "slower": correct(12.0)})
    proposer = RecordingProposer([answer("faster"), answer("slower")])

    go(store, config, run_id, proposer, evaluator, FixedProfiler(profile_of("latency-bound", 30.0)))

    first = proposer.prompts[0]  # the starting kernel's profile (recorded on a 4090: 128 SMs)
    block = first[first.index("[DIAGNOSIS]"):first.index("**Task**")]
    assert "- grid 32 programs on 128 SMs: 96 SMs (75 %) idle [gap_kernel]" in block
    assert "DRAM at 30.0 % of peak" in block
    assert all(r.matches for r in rerender_run(store, run_id))
    off_id = new_run(store, iterations=1, samples=1)[1]  # diagnosis off (and runs recorded before it): no block
    off = RecordingProposer([answer("faster")])
    go(store, new_run(store, iterations=1, samples=1)[0], off_id, off, evaluator,
       FixedProfiler(profile_of("latency-bound", 30.0)))
    assert "[DIAGNOSIS]" not in off.prompts[0]


def test_the_prompt_shows_the_current_best_and_its_metrics(store):
    config, run_id = new_run(store, iterations=2, samples=1)
    evaluator = TableEvaluator({"faster": correct(8.0), "slower": correct(12.0)})
    profiler = FixedProfiler(profile_of("memory-bound", 61.5))
    proposer = RecordingProposer([answer("faster"), answer("slower")])

    go(store, config, run_id, proposer, evaluator, profiler)

    assert "# kernel: faster" not in proposer.prompts[0]
    assert PROBLEM.start.read_text().strip()[:200] in proposer.prompts[0]  # iteration 1 optimizes the start
    assert "# kernel: faster" in proposer.prompts[1]  # iteration 2 optimizes iteration 1's new best
    assert "61.5" in proposer.prompts[1]  # with its ncu metrics
    assert all(r.matches for r in rerender_run(store, run_id))


# ---------------------------------------------------------------- stopping on the proposer's errors


def test_a_proposer_error_stops_the_run_cleanly_with_its_reason(store):
    config, run_id = new_run(store, iterations=3, samples=2)
    evaluator = TableEvaluator({"slower": correct(12.0)})

    outcome = go(store, config, run_id, RecordingProposer([answer("slower")] * 2), evaluator)  # one round's worth

    assert outcome.stop_reason.startswith("replay ran out of answers")
    assert outcome.iterations == 1
    run = store.get_run(run_id)
    assert run.status == "finished" and run.candidates == 3  # nothing recorded is lost


def test_the_budget_stops_the_run_before_a_call_would_exceed_it(store, fake_openai):
    # Priced as gpt-4o ($2.50 per 1M prompt tokens, $10 per 1M completion tokens; a local server has no price of its
    # own); the server reports 200k prompt tokens: $0.51 spent by the first call.
    fake_openai.script([reply((ANSWERS / "rowsum.md").read_text(),
                              usage={"prompt_tokens": 200_000, "completion_tokens": 1_000})])
    config, run_id = new_run(store, iterations=3, samples=1, llm="openai", model="gpt-4o", budget_usd=0.55)
    proposer = OpenAIProposer(OpenAIConfig(model="gpt-4o", base_url=fake_openai.base_url, api_key="sk-test",
                                           price=Price(input=2.5, output=10.0)),
                              budget=Budget(limit_usd=config.budget_usd), on_call=CallLog(store, run_id))
    evaluator = TableEvaluator({}, start=correct(10.0))  # the answer has no marker: it gets the start's result too

    outcome = go(store, config, run_id, proposer, evaluator)

    assert len(fake_openai.requests) == 1  # the second call was never sent
    assert outcome.stop_reason.startswith("budget $0.55 would be exceeded")
    assert outcome.iterations == 1
    assert outcome.usage.prompt_tokens == 200_000 and outcome.usage.cost_usd == pytest.approx(0.51)
    assert store.get_run(run_id).usage == outcome.usage
    [call] = store.calls(run_id)
    assert call.iteration == 1 and call.request["model"] == "gpt-4o" and "choices" in call.response_raw


# ---------------------------------------------------------------- --stage auto


def iteration_stages(store: Store, run_id: str) -> list[tuple[int, str]]:
    return [(it.iteration, it.stage) for it in store.iterations(run_id)]


def test_auto_moves_from_a_latency_bound_kernel_to_parallelism(store):
    config, run_id = new_run(store, stage="auto", iterations=2, samples=1, patience=1)
    evaluator = TableEvaluator({"slower": correct(12.0)})

    outcome = go(store, config, run_id, RecordingProposer([answer("slower")] * 2), evaluator,
                 FixedProfiler(profile_of("latency-bound", 23.5)))

    assert iteration_stages(store, run_id) == [(0, "memory-fusion"), (1, "memory-fusion"), (2, "parallelism")]
    reason = store.iterations(run_id)[2].reason
    assert reason.startswith("latency-bound: DRAM 24 %: ") and "too few warps" in reason
    assert outcome.iterations == 2


def test_auto_goes_algebraic_when_a_memory_bound_kernel_is_near_peak_dram(store):
    config, run_id = new_run(store, stage="auto", iterations=2, samples=1, patience=1)
    evaluator = TableEvaluator({"slower": correct(12.0)})

    go(store, config, run_id, RecordingProposer([answer("slower")] * 2), evaluator,
       FixedProfiler(profile_of("memory-bound", 90.0)))

    assert iteration_stages(store, run_id)[-1] == (2, "algebraic")
    assert "DRAM at 90 % of peak: only moving fewer bytes helps" in store.iterations(run_id)[2].reason


def test_auto_moves_on_at_once_when_the_stages_new_best_is_at_the_dram_roof(store):
    # patience 3 would keep memory-fusion for three rounds without gain; its round-1 best at the roof ends it at once
    config, run_id = new_run(store, stage="auto", iterations=3, samples=1, patience=3)
    evaluator = TableEvaluator({"faster": correct(8.0), "slower": correct(12.0)})

    go(store, config, run_id, RecordingProposer([answer("faster"), answer("slower"), answer("slower")]), evaluator,
       FixedProfiler(profile_of("memory-bound", 88.0)))

    # the starting kernel at the roof gave memory-fusion its round; algebraic keeps its own after that best
    assert iteration_stages(store, run_id) == [(0, "memory-fusion"), (1, "memory-fusion"), (2, "algebraic"),
                                               (3, "algebraic")]
    reasons = [it.reason for it in store.iterations(run_id)]
    assert reasons[1] == "improving on memory-fusion" and reasons[2].startswith("memory-fusion's best is at its roof; memory-bound")
    assert reasons[3] == "1/3 iterations without gain"


def test_auto_stays_on_a_stage_while_it_improves(store):
    config, run_id = new_run(store, stage="auto", iterations=3, samples=1, patience=1)
    evaluator = TableEvaluator({"a": correct(9.0), "b": correct(8.0), "c": correct(7.0)})

    go(store, config, run_id, RecordingProposer([answer("a"), answer("b"), answer("c")]), evaluator,
       FixedProfiler(profile_of("latency-bound")))

    assert {stage for _, stage in iteration_stages(store, run_id)} == {"memory-fusion"}
    assert store.iterations(run_id)[3].reason == "improving on memory-fusion"


def test_auto_stops_when_the_stage_ladder_is_exhausted(store):
    config, run_id = new_run(store, stage="auto", iterations=20, samples=1, patience=1)
    evaluator = TableEvaluator({"slower": correct(12.0)})

    outcome = go(store, config, run_id, RecordingProposer([answer("slower")] * 20), evaluator, FixedProfiler(None))

    walked = [stage for i, stage in iteration_stages(store, run_id) if i >= 1]
    # each stage once, in ladder order; host-overhead only for a host-bound best (these are not timed on a GPU)
    assert walked == [s for s in ladder() if s not in ("correctness", "host-overhead")]
    assert outcome.stop_reason == "stage ladder exhausted (last: algebraic)"
    assert outcome.iterations == len(walked)
    assert all("no profile to classify" in it.reason for it in store.iterations(run_id)[2:])


def best(kind: str | None, dram_pct: float = 30.0) -> Best:
    return Best(candidate="c", code="", ms=1.0, spread_pct=1.0, profile=profile_of(kind, dram_pct))


@pytest.mark.parametrize(("kind", "dram", "expected"), [
    ("latency-bound", 23.5, "parallelism"),
    ("launch-bound", 5.0, "tuning"),
    ("memory-bound", 60.0, "memory-access"),
    ("memory-bound", 92.0, "algebraic"),
    ("compute-bound", 10.0, "algebraic"),
])
def test_choose_stage_follows_the_bottleneck_once_a_stage_stalls(kind, dram, expected):
    chosen, reason = choose_stage("memory-fusion", {"memory-fusion"}, best(kind, dram), stale=2, patience=2)
    assert chosen == expected and reason.startswith(kind)


def host_bound_best(kind: str = "memory-bound") -> Best:
    t = Timing(objective="latency", candidate_ms=0.12, candidate_spread_pct=3.0, device_ms=0.047, latency_ms=0.12,
               host_ms=0.09, launches=2, repeats=100, meaningful=True)
    return best(kind, 40.0).model_copy(update={"timing": t})


def test_a_host_bound_best_goes_to_host_overhead_when_the_run_optimizes_latency():
    chosen, reason = choose_stage("algebraic", {"memory-fusion", "algebraic"}, host_bound_best(), stale=2, patience=2,
                                  objective="latency")
    assert chosen == "host-overhead"
    assert reason.startswith("host-bound: 0.120 ms per call vs 0.047 ms on the GPU (2.6x; 90 us")


def test_on_the_device_clock_host_time_does_not_count_and_ncu_decides():
    chosen, reason = choose_stage("algebraic", {"memory-fusion", "algebraic"}, host_bound_best(), stale=2, patience=2,
                                  objective="device")
    assert chosen == "memory-access" and reason.startswith("memory-bound")


def test_the_prompt_shows_both_clocks_and_says_host_bound():
    b = host_bound_best()
    prompt = loop.iteration_prompt(ladder_stage("host-overhead"), GPU, PROBLEM, b, [])
    block = prompt.split("[TIMING]\n", 1)[1].split("\n\n", 1)[0]
    assert block.splitlines()[:4] == [
        "GPU time per forward: 0.0470 ms (CUDA events, calls queued back to back)",
        "Latency per call: 0.1200 ms (one synchronized call from an idle GPU, Python included)",
        "Kernel launches per forward: 2", "Optimized clock: latency per call"]
    assert "Host-bound: the call takes 2.6x its GPU time; 90 us go to issuing it from Python" in block
    # CPU-mode timings say nothing of the two clocks: no block at all
    cpu = b.model_copy(update={"timing": b.timing.model_copy(update={"meaningful": False})})
    assert "[TIMING]" not in loop.iteration_prompt(ladder_stage("memory-fusion"), GPU, PROBLEM, cpu, [])


def ladder_stage(name: str) -> Stage:
    from agent.stages import get_stage

    return get_stage(name)


def test_choose_stage_without_a_correct_kernel_asks_for_correctness():
    assert choose_stage("memory-fusion", set(), None, stale=0, patience=2) == ("correctness", "no correct kernel yet")


def test_choose_stage_takes_the_next_open_stage_when_the_wanted_one_is_done():
    chosen, reason = choose_stage("memory-access", {"memory-fusion", "parallelism", "memory-access"},
                                  best("latency-bound"), stale=1, patience=1)
    assert chosen == "tuning" and "but parallelism is done: next on the ladder" in reason


def test_choose_stage_stops_when_every_stage_was_visited():
    assert choose_stage("algebraic", set(ladder()), best("memory-bound"), stale=1, patience=1) == (
        None, "stage ladder exhausted (last: algebraic)")


# ---------------------------------------------------------------- resume


def test_a_killed_run_resumes_with_the_same_prompt_and_loses_no_candidate(store):
    results = {"wrong": failed(Verdict.INCORRECT, "incorrect in 6 of 6 trials"), "faster": correct(8.0),
               "slower": correct(11.0)}
    config, run_id = new_run(store, iterations=3, samples=2)
    with pytest.raises(Killed):  # killed while evaluating iteration 2 (round 3: the start, 1, 2)
        go(store, config, run_id, RecordingProposer([answer("wrong"), answer("faster")] * 3),
           KillingEvaluator(results, kill_at_round=3))
    before = {c.id: c for c in store.candidates(run_id)}
    assert sorted(before) == sorted([cid(run_id, 0, 0), cid(run_id, 1, 1), cid(run_id, 1, 2)])
    killed_prompt = json.loads((store.candidates_dir / run_id / "iterations" / "i0002-a1.json").read_text())["prompt"]

    store.reopen_run(run_id)
    proposer = RecordingProposer([answer("slower"), answer("wrong")] * 2)
    outcome = go(store, config, run_id, proposer, TableEvaluator(results))

    assert outcome.iterations == 3 and outcome.best.candidate == cid(run_id, 1, 2)
    assert proposer.prompts[0] == killed_prompt  # same best, same feedback from iteration 1's failure
    assert "incorrect in 6 of 6 trials" in killed_prompt
    after = store.candidates(run_id)
    ids = [c.id for c in after]
    assert len(ids) == len(set(ids)) == 3 + 2 + 2
    for c in after:  # what was recorded before the kill is still there, unchanged
        if c.id in before:
            assert c.model_dump() == before[c.id].model_dump()
    assert f"{run_id}-i2a2-c1" in ids  # the interrupted iteration was redone as a second attempt
    assert all(r.matches for r in rerender_run(store, run_id))
    assert store.get_run(run_id).status == "finished"


def test_a_resumed_run_keeps_its_spending_and_its_place_in_a_replay(store, monkeypatch, fake_openai):
    results = {"wrong": failed(Verdict.INCORRECT, "incorrect"), "slower": correct(11.0)}
    source_config, source = new_run(store, iterations=2, samples=2)
    go(store, source_config, source, RecordingProposer([answer("wrong"), answer("slower"), answer("slower"),
                                                        answer("wrong")]), TableEvaluator(results))
    config, run_id = new_run(store, iterations=2, samples=2, llm=f"replay:{source}", budget_usd=5.0)
    with pytest.raises(Killed):  # killed in iteration 2, after iteration 1 used the source's first two answers
        go(store, config, run_id, build_proposer(assembly(store, config)), KillingEvaluator(results, kill_at_round=3))
    store.reopen_run(run_id)

    replay = build_proposer(assembly(store, config, resumed=run_id))
    proposal = replay.propose(ProposalContext(prompt="", k=2, stage="memory-fusion"))
    assert [a.text for a in proposal.answers] == [answer("slower").text, answer("wrong").text]

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)  # the proposer checks its endpoint when built
    a = assembly(store, config.model_copy(update={"llm": "openai"}), resumed=source)
    a.user = UserConfig(prices={"gpt-4o": ModelPrice(input=2.5, output=10.0, base_url=fake_openai.base_url)})
    paid = build_proposer(a)  # priced by the user's config: a local server has no price of its own
    assert paid.price is not None and paid.price.input == 2.5
    assert paid.budget.spent_usd == pytest.approx(store.get_run(source).usage.cost_usd) and paid.budget.spent_usd > 0
    paid.close()


# ---------------------------------------------------------------- the real harness


@pytest.mark.slow
def test_one_iteration_with_the_real_harness_in_cpu_mode(store, tmp_path):
    config, run_id = new_run(store, iterations=1, samples=2)
    answers = [Answer(text=(ANSWERS / name).read_text(), model="hand-written") for name in ("rowsum.md",
                                                                                          "wrong_scale.md")]
    # No starting kernel (the CLI tests evaluate gap44's): one harness worker fewer, and the first correct
    # candidate becomes the first best.
    problem = PROBLEM.model_copy(update={"start": None})
    evaluator = LocalEvaluator(RoundRequests(problem=problem, device="cpu", timeout_s=120.0, cache_dir=tmp_path / "cache"))
    profiler = NcuProfiler(problem, lambda cid: store.profile_path(run_id, cid), "cpu")  # CPU mode: no profile, no error

    parts = Parts(proposer=ReplayProposer(answers), evaluator=evaluator, profiler=profiler, starter=Starts("problem"))
    outcome = loop.run(task(config, run_id, problem), parts, store, Events())

    rowsum, wrong = store.candidates(run_id)
    assert [c.result.verdict for c in (rowsum, wrong)] == ["correct", "incorrect"]
    assert rowsum.code.startswith("import torch") and "gap_rowsum_kernel" in rowsum.code  # the extracted block
    assert rowsum.result.timing is not None and rowsum.result.timing.meaningful is False
    assert [c.passed for c in rowsum.result.checks] and all(c.passed for c in rowsum.result.checks)
    assert "incorrect" in wrong.result.message
    assert outcome.best.candidate == rowsum.id and outcome.iterations == 1
    assert rowsum.profile is None and wrong.profile is None
    [it1] = store.iterations(run_id)  # no iteration 0: there was nothing to start from
    assert it1.iteration == 1 and it1.best_before is None and it1.prompt


@pytest.mark.parametrize("search,beam,ahead", [("greedy", 1, ["fast", "faster"]), ("beam", 3, ["fast", "faster", "mid"])])
def test_a_profile_is_asked_ahead_as_a_candidate_that_will_need_it_lands(store, search, beam, ahead):
    """Greedy: each candidate that is the round's fastest so far and beats the best (its profile starts while the
    others are judged); beam: each among the round's `beam` fastest that beat the best. A slower one never."""
    config, run_id = new_run(store, iterations=1, samples=4, search=search, beam=beam)
    names = ["slow", "fast", "faster", "mid"]
    evaluator = TableEvaluator({"slow": correct(12.0), "fast": correct(5.0), "faster": correct(3.0), "mid": correct(4.0)})
    profiler = FixedProfiler(profile_of("memory-bound"))  # the start profiled: planning asks nothing more for it

    go(store, config, run_id, RecordingProposer([answer(n) for n in names]), evaluator, profiler)

    assert profiler.asked_ahead == [cid(run_id, 0, 0)] + [cid(run_id, 1, 1 + names.index(n)) for n in ahead]
    assert cid(run_id, 1, 3) in profiler.calls  # the new best, profiled: what was asked ahead is what is used
    assert profiler.prepared == [1, 4]  # each round's answers, before they were judged (agent.profilewarm)
