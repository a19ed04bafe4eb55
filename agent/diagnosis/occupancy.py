"""Warps in flight against the warp slots (too few cannot hide memory latency), and what limits them: the launch's
resources (ncu's theoretical occupancy, and each resource's limit in programs per SM: registers, shared memory,
block size, the per-SM program cap, barriers; the smallest is the limiter), or, where the resources allow more than
is in flight, too few programs to fill the slots.

A report without the limits (profiles recorded before they were collected) gets the finding it always got, word for
word: re-rendering an old run's prompts must give the same text."""

from __future__ import annotations

import math

from agent.diagnosis.model import (
    MAX_BLOCKS_PER_SM,
    OCCUPANCY_LIMITS,
    REGISTERS,
    SHARED_PER_BLOCK,
    THEORETICAL_WARPS,
    DiagnosisInput,
    Finding,
    Remedy,
)
from agent.ncu.metadata import BLOCK, DRAM, WARPS, meta
from agent.schema import KernelProfile

# Achieved under this share of what the resources allow: the launch itself (grid, tail) leaves slots empty too.
FILLED = 0.8

WHAT: dict[str, tuple[Remedy | None, str]] = {
    "registers": ("fewer-registers",
                  "fewer registers per thread (smaller tiles per program, fewer values live at once) so more programs "
                  "fit on an SM"),
    "shared memory": (None, "less shared memory per program (smaller tiles, fewer pipeline stages) so more programs "
                            "fit on an SM"),
    "block size": (None, "a block size that divides the SM's warp slots"),
    "programs per SM": ("more-programs", "more warps per program (num_warps), or more work per program: the "
                                         "per-SM program limit leaves warp slots empty"),
    "barriers": (None, "fewer barriers per program"),
}


def _num(k: KernelProfile, name: str) -> float | None:
    v = k.metrics.get(name)
    return float(v) if isinstance(v, (int, float)) else None


def _block(k: KernelProfile) -> int | None:
    b = _num(k, BLOCK)
    return int(b) if b else (math.prod(k.block) if k.block else None)


def _why(limiter: str, programs: int, k: KernelProfile) -> tuple[str, dict[str, float]]:
    """The limiter in words, with the resource's own figure as evidence."""
    block, regs, smem = _block(k), _num(k, REGISTERS), _num(k, SHARED_PER_BLOCK)
    of = f" of {block} threads" if block else ""
    fit = f"{programs} program{'s' if programs != 1 else ''}{of} per SM"
    if limiter == "registers" and regs is not None:
        return f"registers limit it ({regs:g} per thread: {fit})", {"registers": regs}
    if limiter == "shared memory" and smem is not None:
        kb = smem / 1024
        return f"shared memory limits it ({kb:.1f} KB per program: {fit})", {"shared_kb": round(kb, 1)}
    if limiter == "programs per SM":
        warps = f": {programs * -(-block // 32)} warps" if block else ""
        return f"the per-SM limit of {programs} programs binds ({fit}{warps})", {}
    return f"{limiter} limits it ({fit})", {}


# How each limit reads beside the binding one (ncu's occupancy calculator, programs per SM)
OTHERS = {"registers": "registers", "shared memory": "shared memory", "block size": "warp slots",
          "programs per SM": "the per-SM program limit", "barriers": "barriers"}


def _binding(limits: dict[str, float], cap: float | None) -> str:
    """The limit that binds: the smallest; where the per-SM program cap is as small, the cap (a resource whose limit
    only equals the cap does not bind: ncu caps every limit there, so a 1-warp program's shared memory 'allows' 32)."""
    least = min(limits.values())
    if limits.get("programs per SM") == least or (cap is not None and least >= cap):
        return "programs per SM"
    return min(limits, key=limits.__getitem__)  # dicts keep OCCUPANCY_LIMITS' order: ties go to registers


def _cap(d: DiagnosisInput, k: KernelProfile) -> float | None:
    """The most programs one SM holds (sm_80/sm_90: 32): the report's device attribute, else the GPU catalog's."""
    v = _num(k, MAX_BLOCKS_PER_SM)
    return v if v else (float(d.gpu.max_blocks_per_sm) if d.gpu is not None else None)


def analyze(d: DiagnosisInput) -> list[Finding]:
    low = meta().bottleneck.low_warps_pct
    out = []
    for k in d.kernels()[:1]:
        achieved, theoretical = _num(k, WARPS), _num(k, THEORETICAL_WARPS)
        limits = {name: v for name, metric in OCCUPANCY_LIMITS.items() if (v := _num(k, metric)) is not None}
        seen = achieved if achieved is not None else theoretical
        if seen is None or seen >= low:
            continue
        dram = _num(k, DRAM)
        if dram is not None and dram >= meta().bottleneck.near_peak_dram_pct:
            continue  # at DRAM peak the warps in flight already keep the bytes moving: fewer suffice, no alarm
        if theoretical is None or len(limits) < len(OCCUPANCY_LIMITS):  # a limiter among some limits may be wrong
            if achieved is None:
                continue
            per = f", {k.block[0]} threads per program" if k.block else ""
            out.append(Finding(
                kind="low-occupancy", kernel=k.name,
                evidence=f"warps active {achieved:.1f} % of the slots (under {low:g} %){per}",
                figures={"warps_active_pct": achieved}, remedy="more-programs",
                direction="more warps per SM: more programs, more warps per program, fewer registers"))
            continue
        limiter = _binding(limits, _cap(d, k))
        programs = int(limits[limiter])
        why, extra = _why(limiter, programs, k)
        others = ", ".join(f"{OTHERS[n]} {v:g}" for n, v in limits.items() if n != limiter)
        why = f"{why}; the others allow {others}"
        extra |= {f"limit_{n.replace(' ', '_')}": v for n, v in limits.items()}
        block = _block(k)
        head = (f"warps active {achieved:.1f} % of the slots, at most {theoretical:.1f} % by its resources"
                if achieved is not None else f"at most {theoretical:.1f} % of the warp slots by its resources")
        figures = ({"warps_active_pct": achieved} if achieved is not None else {}) | {
            "theoretical_pct": theoretical, "programs_per_sm": float(programs)} | extra
        if block:
            figures["block"] = float(block)
        unfilled = achieved is not None and achieved < FILLED * theoretical
        detail = limiter
        # the resources alone keep the warps under the threshold; or the per-SM program cap leaves slots empty
        # however many programs there are (one-warp programs: 32 of 64 slots at most): each program needs more warps
        if theoretical < low or (limiter == "programs per SM" and theoretical < 100):
            remedy, direction = WHAT[limiter]
            if unfilled:
                direction += ", and enough programs to fill them"
        else:  # the resources allow enough; the launch does not use them
            assert achieved is not None  # seen is achieved here: theoretical is not under the threshold
            detail = "launch"
            remedy, direction = "more-programs", (f"more programs in flight: the resources allow {theoretical:.0f} % "
                                                  f"of the slots, {achieved:.1f} % are filled")
        out.append(Finding(kind="low-occupancy", kernel=k.name, evidence=f"{head}: {why}", figures=figures,
                           remedy=remedy, direction=direction, detail=detail))
    return out
