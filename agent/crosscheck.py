"""Cross-check a new best's timing from outside its process: the harness times the candidate in the process the
candidate's own code runs in; ncu measures its kernels from outside, when the best is profiled anyway.

ncu profiles the candidate's Triton kernels of one forward (not PyTorch's part of it), so the sum of their
durations is a floor for the forward's device time: a harness time well below it (beyond the band the two agree
in, measured on an H100 in BENCHMARKS.md) did not time the forward that ran, and the candidate is rejected.
"""

from __future__ import annotations

from agent.ncu.metadata import (
    DURATION,  # ncu's kernel duration, ns, summed over a kernel's launches
)
from agent.schema import Profile, Timing

# The harness may read below ncu by this factor and still agree: ncu locks the SM clock to base (1.59 vs 1.98 GHz on
# an H100) and flushes caches, so its durations are the slower of the two; a forged or memoised time is 10-300x off.
BAND = 0.5


def kernels_ms(profile: Profile) -> float | None:
    """The candidate's kernels' total device time under ncu for one forward, in ms (None: no durations)."""
    found = [k.metrics.get(DURATION) for k in profile.kernels.values()]
    known = [float(v) for v in found if v is not None]
    return sum(known) / 1e6 if known else None


def timing_doubt(timing: Timing, profile: Profile | None) -> str | None:
    """Why the harness's time cannot be the forward ncu saw (one line), or None when they agree."""
    if profile is None or not timing.meaningful:
        return None
    floor = kernels_ms(profile)
    device_ms = timing.device_ms if timing.device_ms is not None else timing.candidate_ms  # ncu's clock is the GPU's
    if floor is None or device_ms >= BAND * floor:
        return None
    return (f"timing not reproducible: the harness measured {device_ms:.4f} ms of GPU time per call, but the "
            f"candidate's own kernels take {floor:.4f} ms under ncu for one call [ncu-crosscheck]")
