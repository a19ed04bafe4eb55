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
    "bank_conflicts": ("bank-conflicts", ""),
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
