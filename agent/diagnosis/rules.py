"""ncu's own guided-analysis rules (full metric set), those that estimate a speedup, ranked by it.

Only the rule's identifier and its number leave here: a finding goes into the next prompt, and a report's free text
(titles, messages) is the one place a candidate that forged its report could write prose for the model to read.
`agent ncu REPORT` still shows ncu's whole message to the user.
"""

from __future__ import annotations

import re

from agent.diagnosis.model import DiagnosisInput, Finding

TOP = 3
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def analyze(d: DiagnosisInput) -> list[Finding]:
    found = [(k.name, r) for k in d.kernels() for r in k.rules
             if r.estimated_speedup_pct is not None and r.estimated_speedup_pct > 0 and _IDENTIFIER.fullmatch(r.rule)]
    found.sort(key=lambda x: x[1].estimated_speedup_pct or 0.0, reverse=True)
    return [Finding(kind=f"ncu:{r.rule}", kernel=name,
                    evidence=f"ncu's {r.rule} rule estimates a speedup of up to {r.estimated_speedup_pct:.0f} %",
                    figures={"estimated_speedup_pct": float(r.estimated_speedup_pct or 0.0)},
                    direction=f"see the {r.rule} rule in ncu's guided analysis (agent ncu REPORT)",
                    gain_pct=r.estimated_speedup_pct, source="ncu")
            for name, r in found[:TOP]]
