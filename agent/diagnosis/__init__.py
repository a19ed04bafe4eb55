"""Diagnosis: a profile (and the GPU, and a candidate's two clocks) turned into a few findings with their numbers.

Each analyzer is a pure function in its own module, from a DiagnosisInput to findings; `diagnose` runs them all and
ranks the findings, most valuable first (an estimated gain where one can be computed; the roofline's bound after the
causes; then ncu's own estimate).
The analyzers decide the facts; a template decides the wording.

    grid        programs against SMs: idle SMs, fractional waves (tail)
    balance     the busiest SM against the average one (full set)
    memory      DRAM and L2 throughput against peak; at DRAM peak, no alarm (only fewer bytes help); L2 the busiest unit
    occupancy   warps in flight against the warp slots, and what limits them (registers, shared memory, block size)
    host        the two clocks: host time above device time, launches per call
    library     the device clock against the kernels' time: most of it in the layer left in PyTorch (layout, bias)
    stalls      warp stall reasons, the top two with their share (full set)
    spills      register spills to local memory (full set)
    access      bytes used per sector of global loads and stores, shared-memory bank conflicts (full set)
    roofline    FLOPs per DRAM byte against the ridge point: memory- or compute-bound, and how far from the roof
    rules       ncu's own guided-analysis rules with their estimated speedups
"""

from __future__ import annotations

from agent.diagnosis.model import DIAGNOSIS_METRICS, DiagnosisInput, Finding
from agent.diagnosis.run import ANALYZERS, diagnose, for_prompt

__all__ = ["ANALYZERS", "DIAGNOSIS_METRICS", "DiagnosisInput", "Finding", "diagnose", "for_prompt"]
