"""The one place the loop's parts are built: every implementation is registered here and nowhere else.

    proposer = build_proposer(assembly)          # before the run exists: a bad --llm or key leaves no empty run
    parts = build_parts(assembly, proposer)      # once it does: the evaluator and profiler the placement asks for

PROPOSERS maps `--llm NAME[:ARG]` to a factory (with its argument and a check), EVALUATORS maps where candidates are evaluated (here, this host's
GPUs, a Ray cluster) to one; adding either is one entry here plus its own module. The loop receives the result as
one typed bundle (agent.protocols.Parts) and never imports an implementation.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent.config import UserConfig
from agent.errors import UserError
from agent.protocols import Evaluator, Parts, Profiler, Progress, Proposer, RunTask, StagePolicy
from agent.scale.placement import Placement
from agent.runconfig import RunConfig
from agent.schema import GPUSpec, ProblemSpec, Usage
from agent.store import Store


@dataclass
class Assembly:
    """What the parts of one run are built from."""

    config: RunConfig
    problem: ProblemSpec  # loaded once (agent.problems.load_problem): the parts and the loop take this one
    gpu: GPUSpec
    store: Store
    placement: Placement
    run_id: str | None = None  # set once the run exists (a resumed run has it from the start)
    resumed: str | None = None  # the run being resumed: its spending and its replayed answers count
    progress: Progress | None = None
    user: UserConfig = field(default_factory=UserConfig)  # the user's configuration (prices)
    # which stage each round runs, decided once from the config (an unknown stage is one line, before any record)
    policy: StagePolicy = field(init=False)

    def __post_init__(self) -> None:
        from agent.ladder import policy_of

        self.policy = policy_of(self.config.stage, self.config.patience, self.config.objective)

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress.message(text)


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


class CallLog:
    """The OpenAI proposer's on_call: saves every HTTP exchange with its run.

    Built before the run exists (a bad --llm or a missing key must not leave an empty run behind); `run_id` is set
    once it does. The exchange belongs to the iteration the loop has just begun (recorded before it proposes).
    """

    def __init__(self, store: Store, run_id: str | None = None) -> None:
        self.store, self.run_id = store, run_id

    def __call__(self, request: dict, raw: str) -> None:
        if self.run_id is None:
            raise RuntimeError("an LLM call before its run was created")
        iteration = max((it.iteration for it in self.store.iterations(self.run_id)), default=0)
        self.store.record_call(self.run_id, iteration, request, raw, None)


# ---------------------------------------------------------------- proposers


def _offline(a: Assembly, arg: str | None, calls: CallLog) -> Proposer:
    from agent.offline import OfflineProposer

    return OfflineProposer(a.problem, a.gpu)


def _replay(a: Assembly, arg: str | None, calls: CallLog) -> Proposer:
    from agent.llm import ReplayProposer
    from agent.loop import round_results

    source = a.store.resolve_run(arg or "")
    served = 0
    if a.resumed:  # its complete iterations already consumed the first of the answers
        last = a.store.resume_state(a.resumed).last_iteration
        served = sum(len(round_results(a.store, a.resumed, n)) for n in range(1, last + 1))
    # A replay spends nothing: the recorded usage stays with the run that paid for it.
    answers = [x.model_copy(update={"usage": Usage()}) for x in a.store.answers(source)[served:]]
    return ReplayProposer(answers, name=f"replay:{source}")


def _openai(a: Assembly, arg: str | None, calls: CallLog) -> Proposer:
    from agent.llm import Budget, OpenAIConfig, OpenAIProposer
    from agent.llm.openai_proposer import OPENAI_DEFAULT_URL

    spent = a.store.get_run(a.resumed).usage.cost_usd if a.resumed else 0.0
    c = a.config
    config = OpenAIConfig(model=c.model, timeout_s=c.llm_timeout_s, max_retries=c.llm_retries)
    config.price = a.user.price(c.model, config.base_url or OPENAI_DEFAULT_URL)
    proposer = OpenAIProposer(config,
                              budget=Budget(limit_usd=a.config.budget_usd, spent_usd=spent), on_call=calls)
    proposer.preflight()  # before the run exists: a dead endpoint or a rejected key leaves nothing behind
    return proposer


def _replay_has_answers(store: Store, arg: str) -> None:
    source = store.resolve_run(arg)
    if not store.answers(source):
        raise UserError(f"run {source} recorded no answers to replay")


@dataclass(frozen=True)
class ProposerKind:
    """One `--llm` choice: its factory, the argument it takes after a colon (None: none), and a check that runs
    before the run is created (a bad argument must not leave an empty run behind)."""

    build: Callable[[Assembly, str | None, CallLog], Proposer]
    arg: str | None = None
    check: Callable[[Store, str], None] | None = None

    def usage(self, name: str) -> str:
        return f"{name}:{self.arg}" if self.arg else name


PROPOSERS: dict[str, ProposerKind] = {
    "openai": ProposerKind(_openai),
    "offline": ProposerKind(_offline),
    "replay": ProposerKind(_replay, arg="RUN_ID", check=_replay_has_answers),
}


def llm_choices(sep: str = ", ") -> str:
    return sep.join(kind.usage(name) for name, kind in PROPOSERS.items())


def check_llm(llm: str, store: Store) -> None:
    """Reject a bad --llm in one line before anything is recorded."""
    name, _, arg = llm.partition(":")
    kind = PROPOSERS.get(name)
    if kind is None or bool(kind.arg) != bool(arg):
        raise UserError(f"unknown --llm {llm!r}; choose from: {llm_choices()}")
    if kind.check is not None:
        kind.check(store, arg)


def build_proposer(a: Assembly, calls: CallLog | None = None) -> Proposer:
    """The proposer `--llm` names (see PROPOSERS)."""
    check_llm(a.config.llm, a.store)
    name, _, arg = a.config.llm.partition(":")
    return PROPOSERS[name].build(a, arg or None, calls or CallLog(a.store, a.resumed))


# ---------------------------------------------------------------- evaluators and profilers


def _requests(a: Assembly):  # -> agent.harness.evaluator.RoundRequests (imported lazily: it imports torch's world)
    from agent.harness.evaluator import RoundRequests

    c = a.config
    return RoundRequests(problem=a.problem, device=c.device, timeout_s=c.timeout_s, objective=c.objective,
                         precision=c.precision, energy=c.energy or c.objective == "energy",
                         cache_dir=a.store.root / "candidates" / ".cache", seed=c.seed, hide=[a.store.root],
                         bandwidth_gbs=local_bandwidth(c.device))


def _profile_path(a: Assembly) -> Callable[[str], Path]:
    run_id = a.run_id or ""
    return lambda candidate_id: a.store.profile_path(run_id, candidate_id)


def _local(a: Assembly) -> tuple[Evaluator, Profiler]:
    from agent.harness.evaluator import LocalEvaluator
    from agent.profiler import NcuProfiler
    from agent.profilewarm import WarmRuns

    evaluator = LocalEvaluator(_requests(a), prestart=True)
    return evaluator, NcuProfiler(a.problem, _profile_path(a), a.config.device, on_error=a.say, hide=[a.store.root],
                                  warm=WarmRuns())


def _pool(a: Assembly) -> tuple[Evaluator, Profiler]:
    from agent.scale import ScaleEvaluator, ScaleProfiler

    pool = a.placement.pool()
    a.say(f"evaluating on {pool.describe()}")
    evaluator = ScaleEvaluator(pool, _requests(a), on_round=a.say)
    return evaluator, ScaleProfiler(pool, a.problem, _profile_path(a), a.config.device, on_error=a.say,
                                    hide=[a.store.root])


EVALUATORS: dict[str, Callable[[Assembly], tuple[Evaluator, Profiler]]] = {
    "local": _local,
    "gpus": _pool,
    "cluster": _pool,
}


def task(a: Assembly) -> RunTask:
    """The run as the loop receives it, once it exists (a.run_id set)."""
    if a.run_id is None:
        raise RuntimeError("a run's task before the run was created")
    return RunTask(run_id=a.run_id, config=a.config, problem=a.problem, gpu=a.gpu, policy=a.policy)


def build_parts(a: Assembly, proposer: Proposer) -> Parts:
    """The loop's parts for a run that exists (a.run_id set)."""
    from agent.profileahead import ProfilesAhead
    from agent.starts import Starts

    evaluator, inner = EVALUATORS[a.placement.kind](a)
    profiler = ProfilesAhead(inner, _profile_path(a))  # ahead of need, beside the round's evaluations; once per code
    starter = Starts(a.config.start, a.config.device, (a.store.root,))
    return Parts(proposer=proposer, evaluator=evaluator, profiler=profiler, starter=starter)
