"""Memory access efficiency (full metric set): bytes used of each 32-byte sector fetched for global loads and
stores (32: every byte used; a strided or scattered access wastes the rest), weighed by that access's share of all
global sectors (a reduction's one scalar store per program uses 4 bytes of its sector and costs nothing), and
shared-memory bank conflicts."""

from __future__ import annotations

from agent.diagnosis.model import (
    GLOBAL_LD_BYTES_PER_SECTOR,
    GLOBAL_LD_SECTORS,
    GLOBAL_ST_BYTES_PER_SECTOR,
    GLOBAL_ST_SECTORS,
    SHARED_CONFLICTS,
    SHARED_WAVEFRONTS,
    STALL_REASONS,
    DiagnosisInput,
    Finding,
    stall_metric,
)
from agent.schema import KernelProfile

SECTOR = 32.0
WASTE_BELOW = 24.0  # bytes used per sector: under this a quarter of every fetch is thrown away
CONFLICT_SHARE = 0.2  # conflicts per shared wavefront above which the bank layout costs real time
TRAFFIC_SHARE = 0.1  # an access under this share of the kernel's global sectors is not worth a finding


def analyze(d: DiagnosisInput) -> list[Finding]:
    out = []
    for k in d.kernels():
        sectors = {op: k.metrics.get(m) for op, m in (("load", GLOBAL_LD_SECTORS), ("store", GLOBAL_ST_SECTORS))}
        total = sum(float(v) for v in sectors.values() if isinstance(v, (int, float)))
        for metric, op in ((GLOBAL_LD_BYTES_PER_SECTOR, "load"), (GLOBAL_ST_BYTES_PER_SECTOR, "store")):
            used, mine = k.metrics.get(metric), sectors[op]
            if not isinstance(used, (int, float)) or not isinstance(mine, (int, float)) or total <= 0:
                continue  # without the access's volume there is no telling whether it matters
            share = float(mine) / total
            if 0 < used < WASTE_BELOW and share >= TRAFFIC_SHARE:
                out.append(Finding(
                    kind=f"uncoalesced-{op}", kernel=k.name,
                    evidence=f"global {op}s use {used:.1f} of each 32-byte sector ({100 * used / SECTOR:.0f} %), "
                             f"{100 * share:.0f} % of the kernel's global sectors",
                    figures={"bytes_per_sector": float(used), "sector_share_pct": round(100 * share, 1)},
                    remedy="contiguous-loads",
                    direction="neighbouring threads on neighbouring addresses (contiguous, not strided, offsets)",
                    gain_pct=round(100 * share * (1 - used / SECTOR), 1)))
        conflicts, wavefronts = k.metrics.get(SHARED_CONFLICTS), k.metrics.get(SHARED_WAVEFRONTS)
        if isinstance(conflicts, (int, float)) and isinstance(wavefronts, (int, float)) and wavefronts > 0 \
                and conflicts / wavefronts > CONFLICT_SHARE:
            waiting = _shared_wait_share(k)
            out.append(Finding(
                kind="bank-conflicts", kernel=k.name,
                evidence=f"{conflicts:,.0f} shared-memory bank conflicts over {wavefronts:,.0f} wavefronts "
                         f"({100 * conflicts / wavefronts:.0f} %)"
                         + (f", warps waiting on shared memory {100 * waiting:.0f} % of their stalls"
                            if waiting is not None else ""),
                figures={"conflicts": float(conflicts), "wavefronts": float(wavefronts)},
                remedy="conflict-free-shared", direction="pad or swizzle the shared-memory layout",
                # the conflicting wavefronts replay: their share of the shared-memory work, weighed by the share of
                # the warps' waiting that is on shared memory (where the stalls were counted)
                gain_pct=round(100 * conflicts / wavefronts * (waiting if waiting is not None else 1.0), 1)))
    return out


def _shared_wait_share(k: KernelProfile) -> float | None:
    """The share of the warps' stall cycles spent waiting on shared memory (short scoreboard, MIO queue full)."""
    ratios = {r: float(v) for r in STALL_REASONS if r != "selected"
              if isinstance(v := k.metrics.get(stall_metric(r)), (int, float))}
    total = sum(ratios.values())
    if not ratios or total <= 0:
        return None
    return (ratios.get("short_scoreboard", 0.0) + ratios.get("mio_throttle", 0.0)) / total
