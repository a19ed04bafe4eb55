"""The planted GAP kinds (bench/diag/planted_gap.py) as recorded on an H200 by bench/diag/planted_profile.py: each
kind's root cause heads the findings with its evidence in numbers, the healthy control raises no alarm, and the
prompt's [DIAGNOSIS] block carries the same order (at most five findings).

The reports are read as the loop's profiler reads them; the timing (launches per forward, both clocks) is the one
planted_profile.py measured beside each report, kept in its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.catalog import closest_gpu
from agent.diagnosis import DIAGNOSIS_METRICS, DiagnosisInput, diagnose, for_prompt
from agent.ncu import read_report, stage_metric_set
from agent.schema import Timing
from agent.stages import get_stage

PLANTED = Path(__file__).parent / "data" / "ncu" / "planted37"

# kind -> the root cause that must head the list (kind, detail), for every kind recorded here
CAUSES = {
    "uncoalesced_load": ("uncoalesced-load", ""),
    "tail": ("tail", ""),
    "small_grid": ("small-grid", ""),
    "spill": ("spills", ""),
    "one_warp": ("low-occupancy", "programs per SM"),
    "launches": ("launch-bound", ""),
    "bank_conflicts": ("bank-conflicts", ""),
    "uncoalesced_store": ("uncoalesced-store", ""),
    "int64_index": ("issue-bound", ""),
    "serial_tail": ("imbalance", ""),
    "unfused": ("unfused", ""),
}
# no cause to find: at the DRAM roof (int64_index_32bit: the first run's int64 kernel, whose index stayed under 2**32,
# so LLVM's slow-division bypass divided in 32 bits and the integer work hid under the bytes: 83 % of DRAM peak)
CONTROLS = ("healthy", "int64_index_32bit")


def test_every_recorded_kind_is_checked():
    assert {p.stem for p in PLANTED.glob("*.ncu-rep")} == {*CAUSES, *CONTROLS}


def recorded(kind: str):
    stage = get_stage("memory-fusion")
    profile = read_report(PLANTED / f"{kind}.ncu-rep",
                          [*stage_metric_set(stage), *(m for m in DIAGNOSIS_METRICS if m not in stage_metric_set(stage))])
    t = json.loads((PLANTED / f"{kind}.json").read_text())["time"]
    timing = Timing(candidate_ms=t["device_ms"], candidate_spread_pct=0.0, device_ms=t["device_ms"],
                    latency_ms=t["latency_ms"], host_ms=t["host_ms"], launches=t["launches"], repeats=1,
                    meaningful=True)
    return profile, timing


def findings(kind: str):
    profile, timing = recorded(kind)
    return diagnose(DiagnosisInput(profile=profile, gpu=closest_gpu(profile.gpu), timing=timing))


@pytest.mark.parametrize("kind", sorted(CAUSES))
def test_each_planted_cause_heads_the_findings_with_its_numbers(kind):
    found = findings(kind)
    first = found[0]
    assert (first.kind, first.detail) == CAUSES[kind], [(f.kind, f.detail, f.gain_pct) for f in found]
    assert first.gain_pct is not None and first.gain_pct > 10 and any(c.isdigit() for c in first.evidence)
    assert not [f for f in found[1:] if f.gain_pct is not None and f.gain_pct > first.gain_pct and f.source == "agent"]
    causes = [f for f in found if f.source == "agent" and f.kind not in ("memory-bound", "compute-bound",
                                                                          "at-dram-peak")]
    gains = [f.gain_pct for f in causes if f.gain_pct is not None]
    assert gains == sorted(gains, reverse=True)  # most valuable first, and true


@pytest.mark.parametrize("kind", CONTROLS)
def test_a_kernel_at_the_dram_roof_raises_no_alarm(kind):
    found = [f for f in findings(kind) if f.source == "agent"]
    assert [f.kind for f in found] == ["at-dram-peak", "memory-bound"] and all(f.gain_pct is None for f in found)
    assert found[0].figures["dram_pct"] > 80


@pytest.mark.parametrize("kind", sorted([*CAUSES, *CONTROLS]))
def test_the_prompt_carries_the_same_order_in_at_most_five_findings(kind):
    profile, timing = recorded(kind)
    shown = for_prompt(profile, timing)
    assert len(shown) <= 5 and [f.kind for f in shown] == [f.kind for f in findings(kind)][:len(shown)]


def test_the_launch_heavy_forward_was_profiled_from_a_sample_and_named_from_the_timing():
    """2048 single-program launches a forward; ncu profiled the first 8 (agent.profiler.PROFILED_LAUNCHES) in under
    10 s; the sample's time is not mistaken for the forward's (no "outside the kernels" finding)."""
    record = json.loads((PLANTED / "launches.json").read_text())
    assert record["time"]["launches"] == 2048 and record["launches_profiled"] == {"gap_one_row_kernel": 8}
    assert record["ncu_s"] < 60
    found = findings("launches")
    assert [f.kind for f in found if f.source == "agent"] == ["launch-bound", "memory-bound"]
    assert found[0].evidence.startswith("a forward makes 2048 launches of gap_one_row_kernel (ncu profiled 8), 30.8 µs "
                                        "each on the GPU")
    assert {"small-grid", "imbalance", "low-dram"} <= {s.kind for s in found[0].folded}


def test_the_tail_and_the_int64_kernel_are_told_apart_by_what_the_sms_measurably_did():
    """Both grids end in a partial wave. The tail kind's SMs waited on the busiest 1.40x (a latency-bound loop: the
    SMs 49 % busy); the int64 kernel's last wave kept every SM issuing (max 1.03x the average, SMs 62 % busy)."""
    tail, int64 = findings("tail"), findings("int64_index")
    assert tail[0].kind == "tail" and tail[0].gain_pct == 28.5 and "issue-bound" not in {f.kind for f in tail}
    assert [f.kind for f in int64[:2]] == ["issue-bound", "tail"] and int64[1].gain_pct == 3.2
    assert int64[0].evidence.startswith("the SMs 62 % busy, an instruction issued 61 % of their cycles")
