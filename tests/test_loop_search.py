"""The loop with --search beam and tree, memory and budgets (agent.loop + agent.search), with the test doubles of
tests/test_loop.py: a real Store, real prompts, evaluators that answer from a table."""

from __future__ import annotations

import json

import pytest
from test_loop import (
    GPU,
    PROBLEM,
    DurationProfiler,
    Events,
    FixedProfiler,
    Killed,
    TableEvaluator,
    answer,
    cid,
    correct,
    failed,
    go,
    new_run,
    profile_of,
    store,  # noqa: F401  (the fixture)
)

from agent.protocols import Proposal, ProposalContext
from agent.rerender import rerender_run
from agent.schema import Verdict


class KeyedProposer:
    """Answers by the parent's code: the marker (`# kernel: NAME`) of the code the context shows picks the next
    answers of `script[NAME]` (the starting kernel has none: "start"); once those are spent, "none" (no code)."""

    name = "keyed"

    def __init__(self, script: dict[str, list[str]]) -> None:
        self.script = {k: list(v) for k, v in script.items()}
        self.asked: list[ProposalContext] = []

    def propose(self, ctx: ProposalContext) -> Proposal:
        self.asked.append(ctx)
        key = next((line.removeprefix("# kernel: ").strip() for line in ctx.code.splitlines()
                    if line.startswith("# kernel: ")), "start")
        queue = self.script.get(key, [])
        names = [queue.pop(0) if queue else None for _ in range(ctx.k)]
        return Proposal(answers=[answer(n or "none") for n in names])

    def parents(self) -> list[str | None]:
        return [c.parent for c in self.asked]


# start 10 ms; from it: a (9 ms, the greedy best) and slow (30 ms); from a: nothing good; from slow: fast (2 ms)
PATH = {"start": ["a", "slow"], "a": ["a-worse", "a-worse2"], "slow": ["fast"]}
RESULTS = {"a": correct(9.0), "slow": correct(30.0), "a-worse": correct(12.0), "a-worse2": failed(Verdict.INCORRECT, "no"),
           "fast": correct(2.0), "none": failed(Verdict.NO_CODE, "no ```python code block found")}


@pytest.mark.parametrize(("search", "found"), [("greedy", False), ("beam", True), ("tree", True)])
def test_only_beam_and_tree_follow_a_slower_intermediate_to_the_fastest_kernel(store, search, found):
    config, run_id = new_run(store, iterations=5, samples=3, patience=10, search=search, beam=3)
    proposer = KeyedProposer(PATH)

    outcome = go(store, config, run_id, proposer, TableEvaluator(RESULTS), FixedProfiler())

    fast = [c for c in store.candidates(run_id) if "# kernel: fast" in (c.code or "")]
    if not found:
        assert fast == [] and outcome.best.candidate == cid(run_id, 1, 1)  # a, forever the parent
        assert set(proposer.parents()) == {cid(run_id, 0, 0), cid(run_id, 1, 1)}
        return
    [c] = fast
    slow = next(x.id for x in store.candidates(run_id) if "# kernel: slow" in (x.code or ""))
    assert c.parent == slow and outcome.best.candidate == c.id
    assert store.leaderboard(run=run_id)[0].parent == slow  # the leaderboard says where the best came from
    assert all(r.matches for r in rerender_run(store, run_id))  # every group's prompt, re-rendered from the store


def test_beam_asks_once_per_parent_with_its_own_prompt_and_k_and_records_each_candidates_parent(store):
    config, run_id = new_run(store, iterations=2, samples=4, patience=10, search="beam", beam=3)
    proposer = KeyedProposer({"start": ["a", "slow", "a-worse", "a-worse2"]})

    go(store, config, run_id, proposer, TableEvaluator(RESULTS), FixedProfiler())

    second = proposer.asked[1:]
    # a 9 ms, start 10 ms, a-worse 12 ms: the fastest takes the extra sample; slow (30 ms) is fourth of three
    assert [(c.parent, c.k) for c in second] == [(cid(run_id, 1, 1), 2), (cid(run_id, 0, 0), 1),
                                                 (cid(run_id, 1, 3), 1)]
    assert ["# kernel: a\n" in c.prompt for c in second] == [True, False, False]
    assert ["# kernel: a-worse\n" in c.prompt for c in second] == [False, False, True]
    [it2] = [it for it in store.iterations(run_id) if it.iteration == 2]
    assert [(g.parent, g.k, g.prompt) for g in it2.groups] == [(c.parent, c.k, c.prompt) for c in second]
    assert [c.parent for c in store.candidates(run_id) if c.iteration == 2] == [
        cid(run_id, 1, 1), cid(run_id, 1, 1), cid(run_id, 0, 0), cid(run_id, 1, 3)]


def test_the_memory_block_shows_what_earlier_rounds_tried_and_the_proposer_gets_all_of_it(store):
    config, run_id = new_run(store, iterations=2, samples=2, patience=10, memory=True)
    proposer = KeyedProposer(PATH)

    go(store, config, run_id, proposer, TableEvaluator(RESULTS), FixedProfiler())

    first, second = proposer.asked
    assert "[MEMORY]" not in first.prompt  # nothing tried yet: the prompt is what it always was
    block = second.prompt[second.prompt.index("[MEMORY]"):second.prompt.index("**Task**")]
    assert '- i1-c1 from i0-c0 (memory-fusion): "Try this." → correct, 9 ms, 1.11x faster than its parent' in block
    assert "- i1-c2 from i0-c0" in block and "3.00x slower than its parent" in block
    assert [m.candidate for m in second.memory] == [cid(run_id, 1, 1), cid(run_id, 1, 2)]
    assert all(r.matches for r in rerender_run(store, run_id))


class HalfKillingEvaluator(TableEvaluator):
    """Lands the first answer of round `kill_at_round`, then dies like a SIGKILL (the rest never lands)."""

    def __init__(self, *args, kill_at_round: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kill_at_round = kill_at_round

    def evaluate(self, sources, stage, on_result=None):
        results = super().evaluate(sources, stage)
        if len(self.rounds) == self.kill_at_round:
            on_result(0, results[0])
            raise Killed()
        return results


def test_a_killed_tree_round_is_redone_from_the_same_parents_and_prompts_and_the_proposer_knows_what_it_tried(store):
    config, run_id = new_run(store, iterations=3, samples=2, patience=10, search="tree", memory=True)
    with pytest.raises(Killed):  # round 3 (the start, iteration 1, iteration 2): its first candidate landed
        go(store, config, run_id, KeyedProposer(PATH), HalfKillingEvaluator(RESULTS, kill_at_round=3), FixedProfiler())
    killed = json.loads((store.candidates_dir / run_id / "iterations" / "i0002-a1.json").read_text())["groups"]
    landed = [c for c in store.candidates(run_id) if c.iteration == 2]
    assert len(landed) == 1 and landed[0].parent == killed[0]["parent"]

    store.reopen_run(run_id)
    proposer = KeyedProposer({"start": ["a-worse"], "a": ["a-worse"], "slow": ["fast"]})
    go(store, config, run_id, proposer, TableEvaluator(RESULTS), FixedProfiler())

    redo = proposer.asked[:len(killed)]
    assert [(c.parent, c.stage, c.k, c.prompt) for c in redo] == [
        (g["parent"], g["stage"], g["k"], g["prompt"]) for g in killed]  # same parents, same prompts, same memory
    assert cid(run_id, 2, 1) in [m.candidate for m in redo[0].memory]  # what the killed attempt recorded
    ids = [c.id for c in store.candidates(run_id)]
    assert len(ids) == len(set(ids)) and f"{run_id}-i2a2-c1" in ids
    assert all(r.matches for r in rerender_run(store, run_id))


def test_the_candidate_budget_cuts_the_last_round_and_stops_the_run(store):
    config, run_id = new_run(store, iterations=10, samples=2, patience=10, max_candidates=3)
    outcome = go(store, config, run_id, KeyedProposer(PATH), TableEvaluator(RESULTS), FixedProfiler())
    assert [c.iteration for c in store.candidates(run_id)] == [0, 1, 1, 2]
    assert outcome.stop_reason == "candidate budget spent (3 of --max-candidates 3 judged)" and outcome.iterations == 2


def test_the_time_budget_stops_before_the_next_round(store):
    config, run_id = new_run(store, iterations=10, samples=1, patience=10, max_minutes=1e-9)
    outcome = go(store, config, run_id, KeyedProposer(PATH), TableEvaluator(RESULTS), FixedProfiler())
    assert outcome.stop_reason.startswith("time budget spent") and outcome.iterations == 0


class StagedEvaluator(TableEvaluator):
    def evaluate(self, sources, stage, on_result=None):
        names = [s.name for s in stage] if isinstance(stage, list) else [stage.name] * len(sources)
        self.rounds.append((",".join(names), list(sources)))
        return [self._result(s) for s in sources]


def test_with_stage_auto_each_parent_goes_on_in_its_own_stage_and_one_round_judges_both(store):
    config, run_id = new_run(store, stage="auto", iterations=2, samples=2, patience=1, search="beam", beam=2)
    evaluator = StagedEvaluator({"a": correct(10.5), "slow": correct(11.0), "b": correct(12.0), "c": correct(13.0)})
    proposer = KeyedProposer({"start": ["a", "slow", "b"], "a": ["c"]})

    go(store, config, run_id, proposer, evaluator, FixedProfiler(profile_of("latency-bound")))

    # iteration 2: memory-fusion gained nothing in 1 iteration, so the best (the start, latency-bound) moves to
    # parallelism; a goes on in memory-fusion, the stage that produced it
    assert [(c.parent, c.stage) for c in proposer.asked[1:]] == [(cid(run_id, 0, 0), "parallelism"),
                                                                 (cid(run_id, 1, 1), "memory-fusion")]
    assert evaluator.rounds[-1][0] == "parallelism,memory-fusion"
    assert [c.stage for c in store.candidates(run_id) if c.iteration == 2] == ["parallelism", "memory-fusion"]
    assert all(r.matches for r in rerender_run(store, run_id))


def test_a_parent_whose_timing_ncu_contradicts_is_profiled_once_and_dropped(store):
    config, run_id = new_run(store, iterations=2, samples=2, patience=10, search="beam", beam=2)
    profiler = DurationProfiler({"a": 9.0, "slow": 900.0})  # ncu: slow's kernels take 900 ms, not 30
    evaluator = TableEvaluator({**RESULTS, "slow": correct(9.5)})
    events = Events()

    go(store, config, run_id, KeyedProposer(PATH), evaluator, profiler, events)

    assert profiler.calls.count(cid(run_id, 1, 2)) == 1  # profiled when first chosen as a parent
    assert any(e[0] == "message" and "not a parent" in e[1] for e in events.events)
    second = {c.parent for c in store.candidates(run_id) if c.iteration == 2}
    assert cid(run_id, 1, 2) not in second and store.get_candidate(cid(run_id, 1, 2)).profile is not None



class OrderProfiler(FixedProfiler):
    """FixedProfiler that keeps the order of what it was asked: ("ahead" | "profile", candidate)."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[tuple[str, str]] = []

    def ahead(self, code, stage, candidate_id) -> None:
        self.order.append(("ahead", candidate_id))

    def profile(self, code, stage, candidate_id):
        self.order.append(("profile", candidate_id))
        return super().profile(code, stage, candidate_id)


def test_a_rounds_unprofiled_parents_are_all_asked_for_before_the_first_is_waited_for(store):
    # slow (30 ms) and slow2 (20 ms) are no faster than the start when they land, so nothing asked for them ahead;
    # a, the new best, was profiled as the round ended. Planning iteration 2 wants both slow ones as parents too:
    # both are asked for (to run side by side) before either is waited for.
    config, run_id = new_run(store, iterations=2, samples=4, patience=10, search="beam", beam=4)
    profiler = OrderProfiler()
    profiler.result = profile_of("latency-bound")
    script = {"start": ["a", "slow", "slow2", "none"]}

    go(store, config, run_id, KeyedProposer(script), TableEvaluator({**RESULTS, "slow2": correct(20.0)}), profiler)

    slow, slow2 = cid(run_id, 1, 2), cid(run_id, 1, 3)
    assert {c.parent for c in store.candidates(run_id) if c.iteration == 2} >= {slow, slow2}
    planning = profiler.order[profiler.order.index(("profile", cid(run_id, 1, 1))) + 1:]
    assert sorted(planning[:2]) == [("ahead", slow), ("ahead", slow2)]
    assert sorted(planning[2:4]) == [("profile", slow), ("profile", slow2)]
    assert profiler.calls.count(slow) == profiler.calls.count(slow2) == 1
