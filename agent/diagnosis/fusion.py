"""Two kernels that could be one: an earlier kernel writes to DRAM about as many bytes as a later one reads back
(an intermediate), a large share of the forward's traffic. The intermediate's round trip (written once, read once)
is what fusing saves; the gain is its share of all the DRAM bytes the profiled kernels move (memory-bound kernels'
time goes as their bytes)."""

from __future__ import annotations

from agent.diagnosis.model import DRAM_READ, DRAM_WRITE, DiagnosisInput, Finding
from agent.schema import KernelProfile

MATCH = 0.25  # written and read back within this share of each other: the same tensor
LARGE = 0.2  # of the forward's DRAM bytes: an intermediate worth a finding


def _bytes(k: KernelProfile, name: str) -> float:
    v = k.metrics.get(name)
    return float(v) if isinstance(v, (int, float)) else 0.0


def analyze(d: DiagnosisInput) -> list[Finding]:
    ks = list(d.profile.kernels.values())  # the order they first ran in
    total = sum(_bytes(k, DRAM_READ) + _bytes(k, DRAM_WRITE) for k in ks)
    if len(ks) < 2 or total <= 0:
        return []
    best: tuple[float, KernelProfile, KernelProfile] | None = None
    for i, a in enumerate(ks):
        written = _bytes(a, DRAM_WRITE)
        for b in ks[i + 1:]:
            read = _bytes(b, DRAM_READ)
            if written <= 0 or read <= 0 or abs(written - read) > MATCH * max(written, read):
                continue
            moved = written + min(written, read)
            if moved >= LARGE * total and (best is None or moved > best[0]):
                best = (moved, a, b)
    if best is None:
        return []
    moved, a, b = best
    mb = _bytes(a, DRAM_WRITE) / 1e6
    return [Finding(
        kind="unfused", kernel="",
        evidence=f"{a.name} writes {mb:,.0f} MB to DRAM that {b.name} reads back ({_bytes(b, DRAM_READ) / 1e6:,.0f} "
                 f"MB): an intermediate, {100 * moved / total:.0f} % of the {total / 1e6:,.0f} MB the kernels move",
        figures={"intermediate_mb": round(mb, 1), "share_pct": round(100 * moved / total, 1)},
        remedy="fewer-bytes",
        direction=f"fuse {b.name} into {a.name}: reduce what it computes where it is computed, never writing it",
        gain_pct=round(100 * moved / total, 1))]
