"""ncu's own guided-analysis rules (full metric set), those that estimate a speedup, ranked by it."""

from __future__ import annotations

from agent.diagnosis.model import DiagnosisInput, Finding

TOP = 3


def analyze(d: DiagnosisInput) -> list[Finding]:
    found = [(k.name, r) for k in d.kernels() for r in k.rules
             if r.estimated_speedup_pct is not None and r.estimated_speedup_pct > 0]
    found.sort(key=lambda x: x[1].estimated_speedup_pct or 0.0, reverse=True)
    return [Finding(kind=f"ncu:{r.rule}", kernel=name, evidence=f"{r.title}: {_first_sentence(r.message)}",
                    figures={"estimated_speedup_pct": float(r.estimated_speedup_pct or 0.0)},
                    direction=f"ncu's {r.rule} rule (its guided analysis says more)",
                    gain_pct=r.estimated_speedup_pct, source="ncu")
            for name, r in found[:TOP]]


def _first_sentence(text: str) -> str:
    head = text.strip().split(". ")[0]
    return head if head.endswith(".") else head + "."
