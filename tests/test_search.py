"""The search (agent.search) as a specification: which candidates a round starts from under greedy, beam and tree,
what a node is, the UCT rule with its constant, and the budgets."""

from __future__ import annotations

import math

import pytest

from agent.search import TREE_C, Limits, SearchState
from agent.runconfig import RunConfig
from agent.schema import Candidate, EvalResult, Timing, Verdict

RUN = "20261125-000000-abcd"


def cand(name: str, iteration: int, index: int, ms: float | None, parent: str | None = None, code: str | None = None,
         stage: str = "memory-fusion", verdict: Verdict = Verdict.CORRECT) -> Candidate:
    timing = Timing(candidate_ms=ms, candidate_spread_pct=1.0, repeats=10, meaningful=True) if ms is not None else None
    return Candidate(id=f"{RUN}-i{iteration}-c{index}", run_id=RUN, iteration=iteration, index=index, stage=stage,
                     code=code if code is not None else f"# kernel: {name}\n", parent=parent, idea=name,
                     result=EvalResult(verdict=verdict, message="" if ms else "wrong\nmore", timing=timing))


def cid(iteration: int, index: int) -> str:
    return f"{RUN}-i{iteration}-c{index}"


def state(policy: str, *cands: Candidate, beam: int = 3) -> SearchState:
    return SearchState.of(list(cands), policy, "latency", beam)  # type: ignore[arg-type]


START = cand("start", 0, 0, 10.0)


def test_greedy_gives_every_sample_to_the_runs_best():
    s = state("greedy", START, cand("a", 1, 1, 5.0, cid(0, 0)), cand("b", 1, 2, 20.0, cid(0, 0)))
    assert s.parents(4, best=cid(1, 1)) == [(cid(1, 1), 4)]


def test_without_a_correct_candidate_every_policy_asks_from_nothing():
    failed = cand("wrong", 1, 1, None, verdict=Verdict.INCORRECT)
    for policy in ("greedy", "beam", "tree"):
        assert state(policy, failed).parents(3, best=None) == [(None, 3)]


def test_beam_deals_the_samples_to_the_b_fastest_distinct_candidates_in_rank_order():
    same_code_as_a = cand("a", 2, 1, 4.0, cid(1, 1), code="# kernel: a\n")  # faster by noise, but no new place
    s = state("beam", START, cand("a", 1, 1, 5.0, cid(0, 0)), cand("b", 1, 2, 20.0, cid(0, 0)),
              cand("c", 1, 3, 8.0, cid(0, 0)), same_code_as_a, beam=3)
    assert set(s.nodes) == {cid(0, 0), cid(1, 1), cid(1, 2), cid(1, 3)}
    assert s.parents(4, best=cid(1, 1)) == [(cid(1, 1), 2), (cid(1, 3), 1), (cid(0, 0), 1)]
    assert s.parents(2, best=cid(1, 1)) == [(cid(1, 1), 1), (cid(1, 3), 1)]  # fewer samples than parents


def test_tree_expands_a_slow_line_nobody_followed_once_its_rivals_have_enough_samples():
    # the start (10 ms) has 2 samples; b, ten times slower, none: the start wins until ln(T) has grown
    slow = cand("b", 1, 1, 100.0, cid(0, 0))
    s = state("tree", START, slow, cand("x", 1, 2, None, cid(0, 0), verdict=Verdict.NO_CODE))
    picks = []
    for _ in range(6):
        [(parent, n)] = s.parents(1, best=cid(0, 0))
        picks.append(parent)
        s.visits[parent] = s.visits.get(parent, 0) + n  # as if its answer had been recorded
    # T = 3..7 with 2..6 samples on the start: 1 + sqrt(ln T / (1 + v)) beats 0.1 + sqrt(ln T); at T = 8 it no
    # longer does (1.51 < 1.54)
    assert picks == [cid(0, 0)] * 5 + [cid(1, 1)]


def test_tree_scores_gain_plus_exploration_with_the_stated_constant():
    s = state("tree", START, cand("b", 1, 1, 40.0, cid(0, 0)))
    assert TREE_C == 1.0
    assert s.score(cid(0, 0), visits=1, total=2) == pytest.approx(1 + math.sqrt(math.log(2) / 2))
    assert s.score(cid(1, 1), visits=0, total=2) == pytest.approx(0.25 + math.sqrt(math.log(2)))


def test_tree_spreads_one_rounds_samples_over_parents_counting_the_ones_it_already_gave():
    s = state("tree", START, cand("a", 1, 1, 10.0, cid(0, 0)), cand("b", 1, 2, 10.0, cid(0, 0)))
    # equal gains; the start already holds 2 samples: a and b take turns (the older on a tie) until they hold as many,
    # then all three tie and the oldest, the start, goes first
    assert s.parents(5, best=cid(0, 0)) == [(cid(1, 1), 2), (cid(1, 2), 2), (cid(0, 0), 1)]


def test_with_auto_a_parent_other_than_the_best_goes_on_in_the_stage_that_produced_it():
    s = state("beam", START, cand("a", 1, 1, 5.0, cid(0, 0), stage="parallelism"),
              cand("b", 1, 2, 7.0, cid(0, 0), stage="memory-fusion"), beam=2)
    auto = s.plan(2, best=cid(1, 1), stage="tuning", auto=True)
    assert [(g.parent, g.stage, g.k) for g in auto] == [(cid(1, 1), "tuning", 1), (cid(1, 2), "memory-fusion", 1)]
    fixed = s.plan(2, best=cid(1, 1), stage="tuning", auto=False)
    assert {g.stage for g in fixed} == {"tuning"}


def test_a_parent_ncu_contradicts_is_no_node():
    s = state("beam", START, cand("a", 1, 1, 5.0, cid(0, 0)))
    s.reject(cid(1, 1))
    assert s.parents(2, best=cid(0, 0)) == [(cid(0, 0), 2)]


def test_visits_and_memory_come_from_the_recorded_candidates_the_start_excluded():
    s = state("tree", START, cand("a", 1, 1, 5.0, cid(0, 0)), cand("w", 1, 2, None, cid(0, 0), verdict=Verdict.INCORRECT),
              cand("b", 2, 1, 4.0, cid(1, 1)))
    assert s.visits == {cid(0, 0): 2, cid(1, 1): 1}
    assert [m.candidate for m in s.remembered()] == [cid(1, 1), cid(1, 2), cid(2, 1)]
    assert [m.candidate for m in s.remembered(before=2)] == [cid(1, 1), cid(1, 2)]
    a, w, b = s.remembered()
    assert (a.ms, a.parent_ms, w.ms, w.message, b.parent_ms) == (5.0, 10.0, None, "wrong", 5.0)


def test_the_candidate_budget_cuts_the_last_round_and_then_stops():
    limits = Limits.of(RunConfig(max_candidates=5), judged=3)
    assert limits.samples(4) == 2
    assert limits.spent(2) is None
    limits.judged = 5
    assert limits.samples(4) == 0
    assert limits.spent(0) == "candidate budget spent (5 of --max-candidates 5 judged)"
    assert Limits.of(RunConfig(), judged=100).samples(4) == 4


def test_the_time_budget_stops_before_a_round_once_spent():
    limits = Limits.of(RunConfig(max_minutes=1.0), judged=0)
    assert limits.spent(4) is None
    limits.started -= 61
    assert (limits.spent(4) or "").startswith("time budget spent (1.0 of --max-minutes 1)")
