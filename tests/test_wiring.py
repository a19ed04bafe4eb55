"""agent.wiring, the one assembly point: a proposer or an evaluator registered there is everything `agent run` needs.

The extension tests register a new proposer and a new evaluator the way a contributor would (one entry each in
PROPOSERS / EVALUATORS) and drive the real CLI, store and loop through them: nothing else is touched.
"""

from __future__ import annotations

import dataclasses

import json

import pytest

from agent import cli, wiring
from agent.errors import UserError
from agent.harness.evaluator import LocalEvaluator
from agent.profileahead import ProfilesAhead
from agent.profiler import NcuProfiler
from agent.protocols import Parts, Proposal, ProposalContext, Proposer
from agent.schema import Answer, EvalResult, Stage, Timing, Usage, Verdict
from agent.store import Store

KERNEL = "```python\n# kernel {i}\nclass ModelNew:\n    pass\n```"


class CountingProposer:
    """A new proposer: answer i of a round names itself; it also keeps what the loop told it."""

    name = "counting"

    def __init__(self, tag: str | None) -> None:
        self.tag = tag or "plain"
        self.contexts: list[ProposalContext] = []

    def propose(self, ctx: ProposalContext) -> Proposal:
        self.contexts.append(ctx)
        return Proposal(answers=[Answer(text=f"{self.tag}\n" + KERNEL.format(i=i), model=self.name, usage=Usage())
                                 for i in range(ctx.k)])


class NamedEvaluator:
    """A new evaluator: every candidate is correct, answer i at 10 - i ms (the starting kernel at 10 ms)."""

    def evaluate(self, sources: list[str], stage: Stage, on_result=None) -> list[EvalResult]:
        out = []
        for s in sources:
            i = next((int(x.split()[-1]) for x in s.splitlines() if x.startswith("# kernel ")), -1)
            ms = 10.0 - (i + 1) * 0.5
            out.append(EvalResult(verdict=Verdict.CORRECT, message="", code=s, timing=Timing(
                candidate_ms=ms, candidate_spread_pct=0.5, eager_ms=20.0, speedup_vs_eager=20.0 / ms, repeats=50,
                meaningful=True)))
        return out


class NoProfiler:
    enabled = True

    def ahead(self, code: str, stage: Stage, candidate_id: str) -> None:
        self.asked_ahead = [*getattr(self, "asked_ahead", []), candidate_id]

    def prepare(self, answers: list[str], stages: list[Stage]) -> None:
        self.prepared = [*getattr(self, "prepared", []), len(answers)]

    def profile(self, code: str, stage: Stage, candidate_id: str) -> None:
        return None


@pytest.fixture
def registered(monkeypatch):
    """`--llm counting[:TAG]` and a replaced local evaluator: one registry entry each, as a contributor adds them."""
    built: list[CountingProposer] = []

    def build(a: wiring.Assembly, arg: str | None, calls: wiring.CallLog) -> Proposer:
        built.append(CountingProposer(arg))
        return built[-1]

    monkeypatch.setitem(wiring.PROPOSERS, "counting", wiring.ProposerKind(build, arg="TAG"))
    monkeypatch.setitem(wiring.EVALUATORS, "local", lambda a: (NamedEvaluator(), NoProfiler()))
    return built


def run_cli(tmp_path, *args: str) -> int:
    """The CLI in-process: its exit status, whether main returns it or a one-line error raises SystemExit."""
    try:
        return cli.main(["run", "--root", str(tmp_path), "--device", "cpu", "--gpu", "4090", *args])
    except SystemExit as e:
        return int(e.code or 0)


def test_a_registered_proposer_and_evaluator_run_the_whole_loop(tmp_path, registered, capsys):
    assert run_cli(tmp_path, "--llm", "counting:hello", "--iterations", "2", "--samples", "3", "--stage",
                   "memory-fusion", "--search", "greedy") == 0  # one context a round (beam: one per parent)
    [proposer] = registered
    assert proposer.tag == "hello" and [c.k for c in proposer.contexts] == [3, 3]
    # the loop handed the proposer its state: round 2 sees round 1's best and results
    assert "# kernel 2" in proposer.contexts[1].code and len(proposer.contexts[1].results) == 3
    with Store(tmp_path) as store:
        [run] = store.list_runs()
        cands = store.candidates(run.id)
        assert len(cands) == 1 + 2 * 3  # the starting kernel, then two rounds of three
        assert {c.answer.model for c in cands if c.iteration > 0 and c.answer} == {"counting"}
        assert run.status == "finished" and run.best is not None


def test_a_registered_proposer_is_among_the_choices_an_unknown_one_is_told(tmp_path, registered, capsys):
    assert run_cli(tmp_path, "--llm", "nonsense") == 2
    err = capsys.readouterr().err
    assert "counting:TAG" in err and "offline" in err and "replay:RUN_ID" in err
    assert len(err.strip().splitlines()) <= 2  # one line (and its hint)
    assert not (tmp_path / "candidates").exists() or not any((tmp_path / "candidates").iterdir())


def test_a_proposer_that_takes_an_argument_refuses_to_run_without_one(tmp_path, registered, capsys):
    assert run_cli(tmp_path, "--llm", "counting") == 2
    assert "unknown --llm 'counting'" in capsys.readouterr().err


def test_replay_checks_its_argument_before_the_run_exists(tmp_path):
    from agent.runconfig import RunConfig

    with Store(tmp_path) as store:
        with pytest.raises(UserError, match="unknown run 'nope'"):
            wiring.check_llm("replay:nope", store)
        empty = store.create_run(RunConfig(), "4090", "cpu")
        with pytest.raises(UserError, match=f"run {empty} recorded no answers to replay"):
            wiring.check_llm(f"replay:{empty}", store)
        assert [r.id for r in store.list_runs()] == [empty]  # checking created nothing


def test_the_local_placement_builds_the_harness_evaluator_and_the_ncu_profiler(tmp_path):
    from agent.catalog import find_gpu
    from agent.problems import load_problem
    from agent.scale.placement import Placement
    from agent.runconfig import RunConfig

    with Store(tmp_path) as store:
        config = RunConfig(problem="gap44", stage="memory-fusion", gpu="4090", device="cpu", llm="offline",
                           energy=False)  # a new run's default (RunConfig's own: a record from before the flag)
        a = wiring.Assembly(config=config, problem=load_problem("gap44"), gpu=find_gpu("4090"), store=store,
                            placement=Placement(device="cpu"), run_id="r1")
        parts = wiring.build_parts(a, wiring.build_proposer(a))
        assert isinstance(parts, Parts)
        assert isinstance(parts.evaluator, LocalEvaluator) and isinstance(parts.profiler, ProfilesAhead)
        assert isinstance(parts.profiler.inner, NcuProfiler)  # ncu, asked ahead and once per code
        assert parts.proposer.name == "offline"
        # candidates never see the store, whether evaluated or profiled
        assert store.root in parts.evaluator.requests.hide and store.root in parts.profiler.inner.hide
        assert parts.evaluator.requests.cache_dir == store.root / "candidates" / ".cache"
        # energy per call: measured where the run ranks by it or asks for it, not by default (about 4 s a candidate)
        assert not parts.evaluator.requests.energy
        for asked in ({"energy": True}, {"objective": "energy", "energy": False}):
            b = dataclasses.replace(a, config=config.model_copy(update=asked))
            assert wiring.build_parts(b, wiring.build_proposer(b)).evaluator.requests.energy


def test_llm_choices_lists_every_registered_proposer_once():
    choices = wiring.llm_choices("|").split("|")
    assert choices == [k.usage(n) for n, k in wiring.PROPOSERS.items()]
    assert json.dumps(choices)  # plain strings, usable as argparse's metavar
