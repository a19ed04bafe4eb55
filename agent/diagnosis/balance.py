"""Load imbalance (full metric set): the busiest SM against the average one. Idle SMs and a partial last wave are
the grid analyzer's findings (their cause, computed); `diagnose` then leaves this measured effect out."""

from __future__ import annotations

from agent.diagnosis.model import SM_ACTIVE_AVG, SM_ACTIVE_MAX, DiagnosisInput, Finding

UNEVEN = 1.3  # busiest SM active this many times the average: a fifth or more of the time is waiting on stragglers


def analyze(d: DiagnosisInput) -> list[Finding]:
    out = []
    for k in d.kernels()[:1]:
        avg, peak = k.metrics.get(SM_ACTIVE_AVG), k.metrics.get(SM_ACTIVE_MAX)
        if not all(isinstance(v, (int, float)) for v in (avg, peak)) or not avg:
            continue
        assert isinstance(avg, (int, float)) and isinstance(peak, (int, float))
        ratio = float(peak) / float(avg)
        if ratio >= UNEVEN:
            out.append(Finding(
                kind="imbalance", kernel=k.name,
                evidence=f"the busiest SM was active {ratio:.2f}x the average SM",
                figures={"max_over_avg": round(ratio, 2)}, remedy="more-programs",
                direction="even work per program: more, smaller programs (or a grid of whole waves)",
                gain_pct=round(100 * (1 - 1 / ratio), 1)))
    return out
