"""Variant planning: the ncu figures an answer cites, the meta-parameter space per family, and the walks through it
(nearest the current best first, round robin over families). The order itself is chosen by OfflineProposer.ranked
(agent/offline/__init__.py)."""

from __future__ import annotations

import math
from itertools import product
from typing import Any

from agent.ncu.metadata import DRAM, DURATION, GRID, SM, WARPS, longest_kernel
from agent.offline.models import Family, Variant, _Model
from agent.schema import Profile

# What to restructure for comes from the findings (agent.diagnosis), as the LLM's prompt shows them; this proposer
# keeps one threshold of its own, for choosing a layout: a problem of at least SMALL_GRID_WAVES x the SM count rows
# fills the GPU with one program per row, a smaller one needs split rows.
SMALL_GRID_WAVES = 2
# Split reductions aim for at least this many programs per SM.
SPLIT_PROGRAMS_PER_SM = 4

# The meta-parameter space per family, in search order (the first value of a list is not the default:
# defaults are the ANCHORS below).
SPACE: dict[str, dict[str, list[Any]]] = {
    "row": {"block": [1024, 2048, 4096, 8192], "warps": [4, 8, 16], "stages": [1, 2, 3], "split": [1]},
    "split": {"block": [1024, 2048, 4096], "warps": [4, 8], "stages": [1, 2], "split": [2, 4, 8, 16]},
    "atomic": {"block": [1024, 2048, 4096], "warps": [4, 8], "stages": [1, 2], "split": [2, 4, 8, 16]},
    "persistent": {"block": [2048, 4096, 8192], "warps": [4, 8, 16], "stages": [1, 2], "split": [1, 2, 4, 8]},
    # algebraic: block = rows per tile (BH), split = columns per tile (BW)
    "algebraic": {"block": [4, 8, 16, 32], "warps": [2, 4, 8], "stages": [1, 3], "split": [64, 128]},
    # nhwc: block = elements per tile (positions x channels), split = programs per (n, channel block)
    "nhwc": {"block": [1024, 2048, 4096, 8192], "warps": [4, 8], "stages": [1, 2, 3], "split": [1, 4, 16, 32, 64]},
    # fused: block = output positions per tile, split = programs per (n, channel block of up to 64)
    "fused": {"block": [64, 128, 256], "warps": [4, 8], "stages": [1, 2, 3], "split": [2, 4, 8, 16, 32, 64]},
    # pool: block = pooled positions per step, split = programs per (n, c) row
    "pool": {"block": [256, 512, 1024, 2048], "warps": [4, 8], "stages": [1, 2], "split": [1, 2, 4, 8, 16, 32]},
    # pool_fused: block = pooled positions per program (x all channels)
    "pool_fused": {"block": [32, 64, 128], "warps": [2, 4, 8], "stages": [1, 2], "split": [1]},
}
ANCHORS: dict[str, dict[str, int]] = {
    "row": {"block": 2048, "warps": 4, "stages": 2, "split": 1},  # near the plain kernel that reached 91 % DRAM
    "split": {"block": 2048, "warps": 4, "stages": 2, "split": 4},
    "atomic": {"block": 2048, "warps": 4, "stages": 2, "split": 4},
    "persistent": {"block": 4096, "warps": 8, "stages": 2, "split": 4},
    # 4 x 128 tiles, 2 warps: the fastest of 24 configurations on an H100 (gap44: 31.7 us; 4 warps 36 us, 8 warps
    # 44-55 us: fewer, wider programs leave SMs short of loads in flight; bench/results/gap44_goal_h100)
    "algebraic": {"block": 4, "warps": 2, "stages": 1, "split": 128},
    # torch.compile's shape for gap44 (64 partials per (n, c)); the split is chosen from the grid (nhwc_split)
    "nhwc": {"block": 4096, "warps": 4, "stages": 2, "split": 64},
    # 128 x 64 accumulator tiles over 4 warps, no software pipelining: the fastest of 30 configurations for
    # KernelBench #67 on an H200 (3.87 ms; 2 stages 5.7-6.0 ms, 246 -> 255 registers and spills; 8 warps 5.6 ms;
    # bench/results/fused_h200); the split is chosen from the grid (fused_split)
    "fused": {"block": 128, "warps": 4, "stages": 1, "split": 64},
    # the split is chosen from the rows, as for `split`
    "pool": {"block": 1024, "warps": 4, "stages": 1, "split": 4},
    # 64 pooled positions x 16 channels: the shape of bench/candidates/kb96_fused_convt3d.py (not yet timed on a GPU)
    "pool_fused": {"block": 64, "warps": 4, "stages": 1, "split": 1},
}
# The fused family computes a convolution with fp32-accurate tensor-core products (3xTF32): worth it where the conv's
# output is large against its arithmetic, i.e. its reduction length Cin*KH*KW is short; beyond this it is tried last.
FUSED_MAX_K = 256


class Reading(_Model):
    """The figures of the current best's main kernel (the one with the most GPU time), as an answer cites them (what
    to do about them is the findings' part)."""

    kernel: str = ""
    grid: float | None = None
    warps_pct: float | None = None
    dram_pct: float | None = None
    sm_pct: float | None = None
    duration_us: float | None = None

    @classmethod
    def of(cls, profile: Profile | None) -> Reading:
        if profile is None or not profile.kernels:
            return cls()
        k = longest_kernel(profile)
        assert k is not None
        m = k.metrics
        grid = m.get(GRID)
        if grid is None and k.grid:
            grid = math.prod(k.grid)
        dur = m.get(DURATION)
        return cls(kernel=k.name, grid=grid, warps_pct=m.get(WARPS), dram_pct=m.get(DRAM), sm_pct=m.get(SM),
                   duration_us=dur / 1e3 if dur is not None else None)

    def figures(self, sms: int) -> str:
        """The metrics as the answer's first line cites them."""
        parts = []
        if self.grid is not None:
            rel = "<" if self.grid < SMALL_GRID_WAVES * sms else ">="
            parts.append(f"grid {self.grid:g} {rel} {SMALL_GRID_WAVES}×{sms} SMs")
        if self.warps_pct is not None:
            parts.append(f"warps active {self.warps_pct:.1f} %")
        if self.dram_pct is not None:
            parts.append(f"DRAM {self.dram_pct:.1f} %")
        if self.duration_us is not None:
            parts.append(f"{self.duration_us:.0f} µs")
        return ", ".join(parts) if parts else "no ncu metrics yet"


def nhwc_split(batch: int, channels: int, sms: int) -> int:
    """Programs per (n, channel block of up to 128) for the channels-last reduction: one launch where the images and
    channel blocks fill the GPU, else a split reduction with about SPLIT_PROGRAMS_PER_SM programs per SM."""
    programs = batch * math.ceil(channels / min(128, 1 << max(channels - 1, 0).bit_length()))
    if programs >= SMALL_GRID_WAVES * sms:
        return 1
    wanted = math.ceil(SPLIT_PROGRAMS_PER_SM * sms / max(programs, 1))
    return next((s for s in SPACE["nhwc"]["split"] if s >= wanted), SPACE["nhwc"]["split"][-1])


def fused_split(batch: int, channels: int, sms: int) -> int:
    """Programs per (n, channel block of up to 64) for the fused convolution: about 8 x SPLIT_PROGRAMS_PER_SM
    programs per SM in all, each looping over its share of the tiles (KernelBench #67 on an H200: 64 programs per
    image 3.87 ms, 16: 4.09 ms, 4: 4.21 ms)."""
    programs = batch * math.ceil(channels / 64)
    wanted = math.ceil(8 * SPLIT_PROGRAMS_PER_SM * sms / max(programs, 1))
    return next((s for s in SPACE["fused"]["split"] if s >= wanted), SPACE["fused"]["split"][-1])


def _pow2_at_least(n: int, lo: int = 2, hi: int = 16) -> int:
    p = lo
    while p < n and p < hi:
        p *= 2
    return p


def _around(family: Family, anchor: Variant | None) -> list[Variant]:
    """Every variant of a family, nearest the anchor first (index distance per meta-parameter; ties in a fixed
    order), so the search walks outwards from the current best."""
    space = SPACE[family]
    a: dict[str, Any] = anchor.model_dump() if anchor is not None else {"family": family, **ANCHORS[family]}
    keys = ["block", "warps", "stages", "split"]

    def pos(k: str, value: int) -> float:
        vals = space[k]
        return vals.index(value) if value in vals else min(range(len(vals)), key=lambda i: abs(vals[i] - value))

    variants = [Variant(family=family, **dict(zip(keys, combo))) for combo in product(*(space[k] for k in keys))]

    def dist(v: Variant) -> tuple:
        d = [abs(pos(k, getattr(v, k)) - pos(k, a[k])) for k in keys]
        # split before block before warps before stages: what moves the most bytes in flight first
        return (sum(d), d[3] == 0, d[0] == 0, d[1] == 0, v.key)

    return sorted(variants, key=dist)


def _interleave(lists: list[list[Variant]]) -> list[Variant]:
    """Round robin over the lists (a list named twice gets two turns per round), skipping repeats."""
    seen: set[tuple] = set()
    out: list[Variant] = []
    iters = {id(lst): iter(lst) for lst in lists}
    live = list(lists)
    while live:
        for lst in list(live):
            v = next(iters[id(lst)], None)
            while v is not None and v.key in seen:
                v = next(iters[id(lst)], None)
            if v is None:
                live = [x for x in live if x is not lst]
                continue
            seen.add(v.key)
            out.append(v)
    return out


def _change(old: Variant, new: Variant) -> str:
    """'BLOCK 4096→8192 (8 warps, 2 stages)': what moved, then what stayed."""
    names = {"block": "BLOCK" if new.family != "algebraic" else "tile rows",
             "warps": "warps", "stages": "stages",
             "split": {"split": "programs/row", "atomic": "programs/row", "persistent": "programs/SM",
                       "algebraic": "tile cols", "row": "split", "nhwc": "programs/(n, channels)",
                       "fused": "programs/(n, channels)", "pool": "programs/row", "pool_fused": "split"}[new.family]}
    moved = [f"{names[k]} {getattr(old, k)}→{getattr(new, k)}" for k in ("split", "block", "warps", "stages")
             if getattr(old, k) != getattr(new, k)]
    return (", ".join(moved) or "same") + f" ({new.params()})"
