"""The loop's parts, as the loop sees them: defined once, here, and used as the types everywhere.

    Proposer   proposes K candidate answers for a ProposalContext (the prompt and the state it was rendered from)
    Evaluator  judges a round of answers (agent.harness behind it, locally or on a pool of GPUs)
    Profiler   profiles a new best with ncu (None where it cannot)
    Progress   shows what the loop does (a terminal, JSON lines, nothing)
    RunStore   the store as the loop uses it (agent.store.Store)
    Starter    iteration 0's answers (agent.starts: the problem's starting kernel, torch.compile's kernels)
    StagePolicy which stage each round runs (agent.ladder: one fixed stage, or the ladder of --stage auto)

agent.wiring.build_parts() builds the first three and the starter for a run, agent.wiring.task() the RunTask; tests
pass their own. This module imports types only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import Field

from agent.finding import Finding
from agent.memory_entry import MemoryEntry
from agent.runconfig import RunConfig
from agent.schema import (Answer, Candidate, EvalResult, GPUSpec, Group, Model, OnResult, ProblemSpec, Profile, Stage,
                          Timing, Usage)
from agent.store.records import IterationRecord, ResumeState, RunStatus


class ProposalContext(Model):
    """What every proposer gets: the prompt, and the state it was rendered from (an LLM reads the prompt; the
    offline proposer reads the state). A round with several parents (agent.search) asks once per parent group, each
    with its own prompt and k."""

    prompt: str
    k: int = Field(ge=1, description="how many answers to propose")
    stage: str
    code: str = Field(default="", description="the current best's code (the prompt's [CURRENT CODE])")
    profile: Profile | None = Field(default=None, description="the current best's ncu profile")
    findings: list[Finding] = Field(default_factory=list, description="what the profile and clocks mean "
                                    "(agent.diagnosis): the prompt's [DIAGNOSIS] block, and the offline proposer's "
                                    "reasons to restructure")
    results: list[EvalResult] = Field(default_factory=list, description="the last iteration's results")
    parent: str | None = Field(default=None, description="the candidate `code` is (agent.search: this group's parent)")
    memory: list[MemoryEntry] = Field(default_factory=list, description="everything the run has tried so far, an "
                                      "interrupted attempt at this iteration included (agent.memory): a proposer that "
                                      "reads it never proposes an idea twice, also after --resume")


class Proposal(Model):
    """A proposer's answers, and why it stops proposing, when it does (budget spent, replay exhausted): a normal end,
    not an error. A failure (a bad key, a server gone) is raised as an agent.errors.UserError instead."""

    answers: list[Answer] = Field(default_factory=list)
    stop: str | None = None


@runtime_checkable
class Proposer(Protocol):
    name: str

    def propose(self, ctx: ProposalContext) -> Proposal: ...


class Evaluator(Protocol):
    """Judges a round; `on_result(index, result)` (from any thread) as each verdict is final, the list at the end.
    `stage` is the round's, or one per source (a round whose parents go on in different stages)."""

    def evaluate(self, sources: list[str], stage: Stage | list[Stage],
                 on_result: OnResult | None = None) -> list[EvalResult]: ...


class Profiler(Protocol):
    """`enabled`: whether `profile` can measure anything here (no GPU in CPU mode: it answers None at once)."""

    @property
    def enabled(self) -> bool: ...

    def profile(self, code: str, stage: Stage, candidate_id: str) -> Profile | None: ...


class Profiles(Profiler, Protocol):
    """The profiler the loop holds (agent.profileahead.ProfilesAhead around a Profiler): `ahead` says a candidate's
    profile will be asked for, so it may start now, beside the round's other evaluations."""

    def ahead(self, code: str, stage: Stage, candidate_id: str) -> None: ...

    def prepare(self, answers: list[str], stages: list[Stage]) -> None:
        """A round's answers are about to be judged (one stage each): whatever a profile of them would need may start
        now (agent.profilewarm: ncu's runs, waiting for their code)."""
        ...


class Progress(Protocol):
    """What the loop is doing: an iteration begins, a phase of it (proposing, evaluating, profiling) begins, a
    candidate lands, a new best, money spent, a note."""

    def start_iteration(self, iteration: int, stage: str, reason: str) -> None: ...
    def phase(self, name: str, detail: str = "", total: int = 0) -> None: ...
    def candidate_done(self, candidate: Candidate) -> None: ...
    def new_best(self, candidate: Candidate) -> None: ...
    def usage(self, usage: Usage) -> None: ...
    def message(self, text: str) -> None: ...


class RunStore(Protocol):
    """The store as the loop uses it: what a run has done so far, and a record of everything it does."""

    def resume_state(self, run_id: str) -> ResumeState: ...
    def iterations(self, run_id: str) -> list[IterationRecord]: ...
    def record_iteration(self, run_id: str, iteration: int, stage: str, prompt: str, reason: str,
                         best_before: str | None, groups: list[Group] | None = None) -> IterationRecord: ...
    def end_iteration(self, run_id: str, iteration: int) -> None: ...
    def candidate_id(self, run_id: str, iteration: int, index: int) -> str: ...
    def record_candidate(self, c: Candidate) -> None: ...
    def update_profile(self, candidate_id: str, profile: Profile) -> None: ...
    def update_result(self, candidate_id: str, result: EvalResult) -> None: ...
    def set_best(self, run_id: str, candidate_id: str) -> None: ...
    def get_candidate(self, candidate_id: str) -> Candidate: ...
    def candidates(self, run_id: str) -> list[Candidate]: ...
    def finish_run(self, run_id: str, status: RunStatus = "finished") -> None: ...


class Starter(Protocol):
    """The answers judged at iteration 0 (none: the run starts from the first proposals); it may report a long
    phase (capturing torch.compile's code) and say why an answer it was asked for is missing."""

    def answers(self, problem: ProblemSpec, progress: Progress) -> list[Answer]: ...


@dataclass(frozen=True)
class Parts:
    """The loop's parts for one run, built in one place (agent.wiring.build_parts). `summary` is what the evaluator
    has to say at the end (throughput on several GPUs), `close` what it must release."""

    proposer: Proposer
    evaluator: Evaluator
    profiler: Profiles
    starter: Starter

    def summary(self) -> str | None:
        fn = getattr(self.evaluator, "summary", None)
        return fn() if callable(fn) else None

    def close(self) -> None:
        for part in (self.proposer, self.evaluator, self.profiler):
            fn = getattr(part, "close", None)
            if callable(fn):
                fn()


class Measured(Protocol):
    """What a stage policy reads of the current best (agent.loop.Best)."""

    profile: Profile | None
    timing: Timing | None
    found_in: str | None  # the stage whose round found it (None: a starting kernel)


@dataclass(frozen=True)
class Step:
    """The stage of the next round, and why (None: as requested); no stage: the run stops, `reason` says why."""

    stage: str | None
    reason: str | None = None


class StagePolicy(Protocol):
    """Which stage each round runs, decided once per run (agent.ladder.policy_of). `first`: iteration 0's and the
    first round's; `floor`: where a start the first stage's rules refuse is judged again (None: nowhere); `own_stages`:
    a parent other than the best goes on in the stage that produced it (agent.search.SearchState.plan); `next`: the
    stage of the next round; `stop_after`: why the run stops after a round that left `stale` rounds without a gain."""

    @property
    def first(self) -> str: ...
    @property
    def floor(self) -> str | None: ...
    @property
    def own_stages(self) -> bool: ...
    def next(self, current: str, visited: set[str], best: Measured | None, stale: int) -> Step: ...
    def stop_after(self, stale: int) -> str | None: ...


@dataclass(frozen=True)
class RunTask:
    """What one run is, handed to the loop once: its id, configuration, problem (loaded once; the parts were built
    from the same one), the GPU its prompts target, and its stage policy."""

    run_id: str
    config: RunConfig
    problem: ProblemSpec
    gpu: GPUSpec
    policy: StagePolicy
