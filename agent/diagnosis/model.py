"""What a finding is, and what every analyzer reads."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent.schema import GPUSpec, KernelProfile, Model, Profile, Timing

# Remedies the offline proposer (and a prompt) can act on.
Remedy = Literal["more-programs", "more-bytes-in-flight", "fewer-launches", "fewer-bytes", "contiguous-loads"]


class Finding(Model):
    """One fact about a kernel, with its evidence and what it suggests."""

    kind: str = Field(description="which analyzer, and what it found: 'small-grid', 'low-dram', ...")
    kernel: str = Field(description="the kernel it is about ('' for the whole forward)")
    evidence: str = Field(description="one line with the numbers")
    figures: dict[str, float] = Field(default_factory=dict)
    direction: str = Field(description="what it suggests doing, in a few words")
    remedy: Remedy | None = None
    gain_pct: float | None = Field(default=None, description="estimated share of the time that could go")
    source: Literal["agent", "ncu"] = "agent"


class DiagnosisInput(Model):
    """A profile with what it was taken on and, where known, the candidate's two clocks."""

    profile: Profile
    gpu: GPUSpec | None = None
    timing: Timing | None = None

    def kernels(self) -> list[KernelProfile]:
        """Kernels by GPU time, longest first."""
        from agent.ncu.metadata import DURATION

        def dur(k: KernelProfile) -> float:
            v = k.metrics.get(DURATION)
            return float(v) if isinstance(v, (int, float)) else 0.0

        return sorted(self.profile.kernels.values(), key=dur, reverse=True)

    def sms(self, k: KernelProfile) -> int | None:
        from agent.ncu.metadata import SM_COUNT

        if self.gpu is not None:
            return self.gpu.sms
        return next((int(v) for n in SM_COUNT if isinstance(v := k.metrics.get(n), (int, float))), None)
