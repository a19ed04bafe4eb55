"""Register spills (full metric set, or the diagnosis's counters): values that do not fit the registers go to local
memory and back. Their cost is the local traffic's share of what the kernel moves through L1: the local sectors
ncu counted, or, in a report without them, each spill instruction's 128 bytes (a warp's 32 four-byte values)."""

from __future__ import annotations

from agent.diagnosis.model import (
    GLOBAL_LD_SECTORS,
    GLOBAL_ST_SECTORS,
    LOCAL_LD_SECTORS,
    LOCAL_ST_SECTORS,
    REGISTERS,
    SPILLS,
    DiagnosisInput,
    Finding,
)
from agent.schema import KernelProfile

SECTORS_PER_SPILL = 4  # one warp-wide 4-byte spill instruction moves 128 bytes: four 32-byte sectors


def _num(k: KernelProfile, name: str) -> float | None:
    v = k.metrics.get(name)
    return float(v) if isinstance(v, (int, float)) else None


def analyze(d: DiagnosisInput) -> list[Finding]:
    out = []
    for k in d.kernels():
        spills, regs = _num(k, SPILLS), _num(k, REGISTERS)
        if spills is None or spills <= 0:
            continue
        counted = [v for v in (_num(k, LOCAL_LD_SECTORS), _num(k, LOCAL_ST_SECTORS)) if v is not None]
        local = sum(counted) if counted else spills * SECTORS_PER_SPILL
        glob = [v for v in (_num(k, GLOBAL_LD_SECTORS), _num(k, GLOBAL_ST_SECTORS)) if v is not None]
        share = local / (local + sum(glob)) if glob and local + sum(glob) > 0 else None
        at = f"{regs:g} registers per thread, " if regs is not None else ""
        traffic = (f": {local * 32 / 1e6:,.1f} MB of local-memory traffic, {100 * share:.0f} % of what it moves "
                   f"through L1" if share is not None else "")
        out.append(Finding(
            kind="spills", kernel=k.name, evidence=f"{at}{spills:,.0f} spill instructions (local memory){traffic}",
            figures={"spill_instructions": spills} | ({"registers": regs} if regs is not None else {})
            | ({"local_share_pct": round(100 * share, 1)} if share is not None else {}),
            remedy="fewer-registers",
            direction="fewer values live at once: smaller tiles per program (BLOCK), more warps, no per-thread arrays",
            gain_pct=round(100 * share, 1) if share is not None else None))
    return out
