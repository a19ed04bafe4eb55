"""The forward's GPU time against its own kernels': where most of it is outside them, it is spent in the heavy layer
left in PyTorch (a convolution), and what pays is what torch.compile does to that layer: its input and weight in
channels-last (cuDNN's fast layout; a Triton copy of a heavy layer's operands is allowed by memory-fusion, it is not an
intermediate), called without its bias, the bias added in the kernel's epilogue.

The kernels' time is ncu's, at its locked base clock (longer than the device clock's): the share outside them is, if
anything, understated."""

from __future__ import annotations

from agent.diagnosis.model import DiagnosisInput, Finding
from agent.ncu.metadata import DURATION, meta


def analyze(d: DiagnosisInput) -> list[Finding]:
    t = d.timing
    if t is None or not t.meaningful or t.device_ms is None or not d.profile.kernels:
        return []
    ns = [v for k in d.profile.kernels.values() if isinstance(v := k.metrics.get(DURATION), (int, float))]
    if not ns:
        return []
    kernels_ms = sum(ns) / 1e6
    profiled = sum(k.launches for k in d.profile.kernels.values())
    if t.launches is not None and t.launches > profiled > 0:  # ncu profiled a sample of the forward's launches
        kernels_ms *= t.launches / profiled
    outside = t.device_ms - kernels_ms
    if outside <= meta().bottleneck.outside_share * t.device_ms:
        return []
    pct = 100 * outside / t.device_ms
    return [Finding(
        kind="outside-kernels", kernel="",
        evidence=f"the forward takes {t.device_ms:.3f} ms on the GPU, its Triton kernels {kernels_ms:.3f} ms: "
                 f"{pct:.0f} % is in the layers left in PyTorch",
        figures={"device_ms": t.device_ms, "kernels_ms": round(kernels_ms, 4), "outside_pct": round(pct, 1)},
        remedy="library-layout",
        direction="speed up the layer left in PyTorch as torch.compile does: its input and weight in channels-last "
                  "(a copy of a heavy layer's operands is not an intermediate), its bias added in your epilogue")]
