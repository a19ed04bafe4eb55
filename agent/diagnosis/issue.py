"""Instruction issue as the limit (the diagnosis's counters): the SMs issue an instruction most cycles while DRAM
and L2 are far from busy, so it is the instructions, not the bytes, that set the time: index arithmetic (64-bit
division and remainder per element), address computation, conversions. The gain is what remains once the busiest
memory unit would set the time instead of the SMs (time taken as proportional to the busiest unit's load). Only for a kernel
the roofline calls memory-bound: FLOPs a kernel must do keep a compute-bound one issuing, and that is no fault."""

from __future__ import annotations

from agent.diagnosis.model import (
    ALU_PIPE,
    GLOBAL_LD_SECTORS,
    GLOBAL_ST_SECTORS,
    INSTRUCTIONS,
    ISSUE_ACTIVE,
    L2,
    DiagnosisInput,
    Finding,
)
from agent.diagnosis.roofline import measure
from agent.ncu.metadata import DRAM, SM, meta
from agent.schema import KernelProfile


def _num(k: KernelProfile, name: str) -> float | None:
    v = k.metrics.get(name)
    return float(v) if isinstance(v, (int, float)) else None


def analyze(d: DiagnosisInput) -> list[Finding]:
    t = meta().bottleneck
    out = []
    for k in d.kernels()[:1]:
        issue, dram, l2, sm = _num(k, ISSUE_ACTIVE), _num(k, DRAM), _num(k, L2), _num(k, SM)
        # the SMs well used (ncu's SpeedOfLight: 60 %) and issuing most cycles: below that a kernel waits on latency
        # (seen on an H200: a latency-bound loop issued 68 % of its active cycles, its SMs 49 % busy over the run)
        if issue is None or sm is None or issue < t.bound_pct or sm < t.bound_pct:
            continue
        memory = max(v for v in (dram, l2, 0.0) if v is not None)
        if memory >= sm or (dram is not None and dram >= t.near_peak_dram_pct):
            continue
        roof = measure(k, d.gpu)
        if roof is None or not roof.memory_bound:
            continue  # arithmetic a kernel must do keeps its SMs issuing: the roofline's compute-bound says so
        alu, inst = _num(k, ALU_PIPE), _num(k, INSTRUCTIONS)
        sectors = sum(v for v in (_num(k, GLOBAL_LD_SECTORS), _num(k, GLOBAL_ST_SECTORS)) if v is not None)
        per = f", {inst / sectors:.1f} warp instructions per 32-byte sector moved" if inst and sectors else ""
        pipe = f", the integer (ALU) pipe {alu:.0f} % busy" if alu is not None else ""
        out.append(Finding(
            kind="issue-bound", kernel=k.name,
            evidence=f"the SMs {sm:.0f} % busy, an instruction issued {issue:.0f} % of their cycles, while DRAM and L2 "
                     f"ran at most {memory:.0f} %"
                     f"{pipe}{per}: instructions, not bytes, set the time",
            figures={"issue_active_pct": round(issue, 1), "sm_pct": round(sm, 1), "memory_pct": round(memory, 1)}
            | ({"alu_pct": round(alu, 1)} if alu is not None else {})
            | ({"inst_per_sector": round(inst / sectors, 2)} if inst and sectors else {}),
            direction="fewer instructions per element: 32-bit index arithmetic, no division or remainder per "
                      "element (iterate rows and columns as loops), addresses computed once per tile",
            gain_pct=round(100 * (1 - memory / sm), 1)))
    return out
