"""agent/ladder.py: the stage of each round as a policy decided once: one fixed stage, or --stage auto's ladder with
its rules for moving on (stalled for --patience rounds; the stage's own best at its roof)."""

from __future__ import annotations

import pytest

from agent.errors import UserError
from agent.ladder import AUTO, FLOOR, AtRoof, Fixed, Ladder, Stalled, policy_of
from agent.loop import Best
from agent.schema import Bottleneck, KernelProfile, Profile

DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"


def best(dram_pct: float, found_in: str | None = "memory-fusion", kind: str = "memory-bound") -> Best:
    profile = Profile(gpu="4090", kernels={"gap_kernel": KernelProfile(name="gap_kernel", metrics={
        DRAM: dram_pct, "launch__grid_size": 4096})},
        bottleneck=Bottleneck(kind=kind, reason=f"{kind}: DRAM {dram_pct:.0f} %", figures={"dram_pct": dram_pct}))
    return Best(candidate="c", code="", ms=1.0, spread_pct=1.0, profile=profile, found_in=found_in)


def test_a_named_stage_is_a_fixed_policy_and_auto_the_ladder_from_the_stage_above_its_floor():
    fixed = policy_of("tuning", patience=2)
    assert isinstance(fixed, Fixed) and (fixed.first, fixed.floor, fixed.own_stages) == ("tuning", None, False)
    assert fixed.next("tuning", {"tuning"}, best(90.0, "tuning"), stale=0).stage == "tuning"  # no roof moves it
    assert fixed.stop_after(1) is None and fixed.stop_after(2) == "no improvement in 2 iterations (patience 2)"
    ladder = policy_of(AUTO, patience=2)
    assert isinstance(ladder, Ladder) and (ladder.first, ladder.floor, ladder.own_stages) == (
        "memory-fusion", FLOOR, True)
    assert ladder.stop_after(99) is None  # a stalled stage is left, not the run


def test_an_unknown_stage_is_one_line_naming_the_choices():
    with pytest.raises(UserError, match="unknown stage 'fusion'") as e:
        policy_of("fusion", patience=3)
    assert "memory-fusion" in str(e.value) and "\n" not in e.value.message


def test_the_ladder_moves_on_at_once_when_the_stages_own_best_is_at_its_roof():
    step = policy_of(AUTO, patience=3).next("memory-fusion", {"memory-fusion"}, best(88.0), stale=0)
    assert step.stage == "algebraic"
    assert step.reason is not None and step.reason.startswith("memory-fusion's best is at its roof; memory-bound")
    assert "only moving fewer bytes helps" in step.reason


@pytest.mark.parametrize(("why", "b", "stale", "reason"), [
    ("below the roof", best(60.0), 0, "improving on memory-fusion"),
    ("a starting kernel at the roof: the stage has its rounds", best(88.0, found_in=None), 0,
     "improving on memory-fusion"),
    ("an earlier stage's best at the roof", best(88.0, found_in="correctness"), 1, "1/3 iterations without gain"),
])
def test_the_ladder_stays_while_no_rule_for_moving_on_holds(why, b, stale, reason):
    step = policy_of(AUTO, patience=3).next("memory-fusion", {"memory-fusion"}, b, stale=stale)
    assert (step.stage, step.reason) == ("memory-fusion", reason), why


def test_after_the_roof_the_next_stage_gets_its_rounds_from_the_same_best():
    # algebraic was entered for memory-fusion's best at the DRAM roof: that best does not send it on at once
    step = policy_of(AUTO, patience=3).next("algebraic", {"memory-fusion", "algebraic"}, best(88.0), stale=0)
    assert (step.stage, step.reason) == ("algebraic", "improving on algebraic")


def test_each_rule_says_whether_it_holds():
    assert Stalled(2).holds("tuning", best(10.0), stale=2) == "" and Stalled(2).holds("tuning", best(10.0), 1) is None
    assert AtRoof().holds("memory-fusion", best(88.0), stale=0) == "memory-fusion's best is at its roof"
    assert AtRoof().holds("memory-fusion", best(50.0), stale=0) is None
    # no profile: nothing says it is at a roof
    assert AtRoof().holds("memory-fusion", best(88.0).model_copy(update={"profile": None}), stale=0) is None
