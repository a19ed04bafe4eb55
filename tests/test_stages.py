"""The stage ladder as data: order, metrics, rules, absent Triton functions."""

from __future__ import annotations

import pytest

from agent.errors import UserError
from agent.prompts import templates_dir
from agent.stages import (
    absent_triton_functions,
    get_stage,
    ladder,
    load_stages,
    parse_stages,
)

SEED_METRICS = [
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "launch__grid_size",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
]


def test_ladder_order():
    assert ladder() == ("correctness", "memory-fusion", "parallelism", "memory-access", "tuning", "algebraic",
                        "host-overhead")
    assert [s.name for s in load_stages()] == list(ladder())


def test_memory_fusion_shows_exactly_the_seeds_five_metrics_in_order():
    assert get_stage("memory-fusion").metrics == SEED_METRICS


def test_memory_fusion_rules_forbid_intermediate_stores_and_say_why():
    rules = get_stage("memory-fusion").rules
    assert rules.forbid_store_then_load and rules.max_intermediate_write == 0.125
    assert "partial" in rules.intermediate_reason


def test_other_stages_add_no_rules():
    for s in load_stages():
        if s.name != "memory-fusion":
            assert s.rules.max_intermediate_write is None and not s.rules.forbid_store_then_load


def test_every_stage_has_a_template_focus_and_distinct_metrics():
    for s in load_stages():
        assert (templates_dir() / s.template).is_file(), s.template
        assert s.focus and s.metrics
        assert len(set(s.metrics)) == len(s.metrics), s.name


def test_parallelism_asks_for_grid_waves_and_occupancy():
    m = get_stage("parallelism").metrics
    assert {"launch__grid_size", "launch__waves_per_multiprocessor",
            "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct"} <= set(m)


def test_stage_metric_names_exist_in_a_full_ncu_report(shared):
    """Every name a stage asks for is one ncu reports (the seed kernel's --set full report on an H100)."""
    import ncu_report
    report = shared / "fixtures" / "ncu" / "seed_h100_full.ncu-rep"
    if not report.exists():
        pytest.skip("no full ncu report fixture")
    action = ncu_report.load_report(str(report)).range_by_idx(0).action_by_idx(0)
    names = set(action.metric_names())
    # a full report holds DRAM throughput as gpu__dram_throughput (agent/data/metrics.toml aliases it)
    names.add("dram__throughput.avg.pct_of_peak_sustained_elapsed")
    for s in load_stages():
        assert set(s.metrics) <= names, (s.name, set(s.metrics) - names)


def test_absent_triton_functions_are_the_seeds():
    assert absent_triton_functions() == ["tl.tanh", "tl.sigmoid", "tl.gelu", "tl.silu", "tl.softmax", "tl.mish"]


def test_unknown_stage_names_the_choices():
    with pytest.raises(UserError, match=r"unknown stage 'fusion'; choose from: correctness, memory-fusion, "):
        get_stage("fusion")


def test_get_stage_returns_a_copy():
    get_stage("tuning").metrics.append("x")
    assert "x" not in get_stage("tuning").metrics


@pytest.mark.parametrize("text,why", [
    ('[[stages]]\nname = "a"\nfocus = "f"\ntemplate = "a.j2"\n', "metrics"),
    ('[[stages]]\nname = "a"\nfocus = "f"\ntemplate = "a.j2"\nmetrics = []\nrules = { max_stores = 1 }\n', "max_stores"),
    ("", "no \\[\\[stages\\]\\]"),
    ('[[stages]]\nname = "a"\nfocus = "f"\ntemplate = "a.j2"\nmetrics = []\n' * 2, "twice"),
])
def test_malformed_stages_fail(text, why):
    with pytest.raises(UserError, match=why):
        parse_stages(text)
