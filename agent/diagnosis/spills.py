"""Register spills (full metric set): values that do not fit the registers go to local memory and back."""

from __future__ import annotations

from agent.diagnosis.model import REGISTERS, SPILLS, DiagnosisInput, Finding


def analyze(d: DiagnosisInput) -> list[Finding]:
    out = []
    for k in d.kernels():
        spills, regs = k.metrics.get(SPILLS), k.metrics.get(REGISTERS)
        if not isinstance(spills, (int, float)) or spills <= 0:
            continue
        at = f"{regs:g} registers per thread, " if isinstance(regs, (int, float)) else ""
        out.append(Finding(
            kind="spills", kernel=k.name, evidence=f"{at}{spills:,.0f} spill instructions (local memory)",
            figures={"spill_instructions": float(spills)} | ({"registers": float(regs)}
                                                              if isinstance(regs, (int, float)) else {}),
            remedy="fewer-registers",
            direction="fewer values live at once: smaller tiles per program (BLOCK), more warps, no per-thread arrays"))
    return out
