"""Memory access efficiency (full metric set): bytes used of each 32-byte sector fetched for global loads and
stores (32: every byte used; a strided or scattered access wastes the rest), and shared-memory bank conflicts."""

from __future__ import annotations

from agent.diagnosis.model import (
    GLOBAL_LD_BYTES_PER_SECTOR,
    GLOBAL_ST_BYTES_PER_SECTOR,
    SHARED_CONFLICTS,
    SHARED_WAVEFRONTS,
    DiagnosisInput,
    Finding,
)

SECTOR = 32.0
WASTE_BELOW = 24.0  # bytes used per sector: under this a quarter of every fetch is thrown away
CONFLICT_SHARE = 0.2  # conflicts per shared wavefront above which the bank layout costs real time


def analyze(d: DiagnosisInput) -> list[Finding]:
    out = []
    for k in d.kernels():
        for metric, op in ((GLOBAL_LD_BYTES_PER_SECTOR, "load"), (GLOBAL_ST_BYTES_PER_SECTOR, "store")):
            used = k.metrics.get(metric)
            if isinstance(used, (int, float)) and 0 < used < WASTE_BELOW:
                out.append(Finding(
                    kind=f"uncoalesced-{op}", kernel=k.name,
                    evidence=f"global {op}s use {used:.1f} of each 32-byte sector ({100 * used / SECTOR:.0f} %)",
                    figures={"bytes_per_sector": float(used)}, remedy="contiguous-loads",
                    direction="neighbouring threads on neighbouring addresses (contiguous, not strided, offsets)",
                    gain_pct=round(100 * (1 - used / SECTOR), 1)))
        conflicts, wavefronts = k.metrics.get(SHARED_CONFLICTS), k.metrics.get(SHARED_WAVEFRONTS)
        if isinstance(conflicts, (int, float)) and isinstance(wavefronts, (int, float)) and wavefronts > 0 \
                and conflicts / wavefronts > CONFLICT_SHARE:
            out.append(Finding(
                kind="bank-conflicts", kernel=k.name,
                evidence=f"{conflicts:,.0f} shared-memory bank conflicts over {wavefronts:,.0f} wavefronts "
                         f"({100 * conflicts / wavefronts:.0f} %)",
                figures={"conflicts": float(conflicts), "wavefronts": float(wavefronts)},
                remedy="conflict-free-shared", direction="pad or swizzle the shared-memory layout"))
    return out
