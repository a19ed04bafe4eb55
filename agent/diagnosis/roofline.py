"""Where each kernel sits on the roofline: its arithmetic intensity (FLOPs per DRAM byte) against the GPU's ridge
point (peak FLOP/s over peak bandwidth), what it achieved against both peaks, and the time its bytes or FLOPs would
take at the roof, whichever is longer: the most that any change short of doing less can gain.

FLOPs are those ncu's roofline counts (model.FLOP_WEIGHTS, every precision), from the per-cycle rates x the SM clock
x the duration (ptxas's HFMA2.MMA register moves count as fp16 FMAs there too: 1.5 % of the seed kernel's). Bytes are DRAM's, read + written. The peaks are the GPU's at the clocks the profile ran at: ncu's
per-cycle peaks x the measured clocks. ncu locks the SM clock to base (1.59 of 1.98 GHz on an H100), so against the
datasheet's 67 TFLOP/s a kernel at its base-clock peak would look 20 % short of a roof it had reached. A report
without those peaks is judged against the catalog's datasheet figures (fp32_tflops, memory_bandwidth_gbs); a
precision with no peak of its own is timed at FP32's. A report without the FLOP or byte counters (older stage-set
reports) yields nothing.

The distance to the roof (figures' headroom_pct) bounds what every cause together can gain: it says where the
kernel sits, never a gain of its own that would compete with a cause's (agent.diagnosis.graph ranks it after them).
"""

from __future__ import annotations

from agent.diagnosis.model import (
    DRAM_CLOCK,
    DRAM_PEAK_PER_CYCLE,
    DRAM_READ,
    DRAM_WRITE,
    FLOP_WEIGHTS,
    SM_CLOCK,
    DiagnosisInput,
    Finding,
    Remedy,
    flop_rate_metric,
    fma_op,
    peak_rate_metric,
)
from agent.ncu.metadata import DURATION, meta
from agent.schema import GPUSpec, KernelProfile, Model


class Roof(Model):
    """One kernel's measured work against its GPU's peaks (SI units: FLOP, byte, second)."""

    seconds: float
    flops: float
    dram_bytes: float
    peak_flops: float  # FP32's: the ridge point's numerator
    peak_bytes: float
    compute_s: float  # every precision's FLOPs at its own peak

    @property
    def memory_s(self) -> float:
        return self.dram_bytes / self.peak_bytes

    @property
    def memory_bound(self) -> bool:
        return self.memory_s >= self.compute_s

    @property
    def roof_s(self) -> float:
        return max(self.memory_s, self.compute_s)

    @property
    def intensity(self) -> float:
        return self.flops / self.dram_bytes

    @property
    def ridge(self) -> float:
        return self.peak_flops / self.peak_bytes


def _figure(x: float) -> str:
    """Three significant digits, never an exponent: 0.256, 16.0, 8,954."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.3g}"


def _num(k: KernelProfile, name: str) -> float | None:
    v = k.metrics.get(name)
    return float(v) if isinstance(v, (int, float)) else None


def measure(k: KernelProfile, gpu: GPUSpec | None) -> Roof | None:
    """The kernel's roofline figures, or None where the report lacks what they need."""
    duration_ns, clock = _num(k, DURATION), _num(k, SM_CLOCK)
    read, write = _num(k, DRAM_READ), _num(k, DRAM_WRITE)
    if not duration_ns or not clock or read is None or write is None or read + write <= 0:
        return None
    seconds = duration_ns * 1e-9

    def peak(precision: str) -> float | None:
        op = fma_op(precision)
        per_cycle = _num(k, peak_rate_metric(op))
        return per_cycle * FLOP_WEIGHTS[precision][op] * clock if per_cycle else None

    fp32_peak = peak("fp32") or (gpu.fp32_tflops * 1e12 if gpu is not None else None)
    bw = _num(k, DRAM_PEAK_PER_CYCLE), _num(k, DRAM_CLOCK)
    peak_bytes = bw[0] * bw[1] if bw[0] and bw[1] else (gpu.memory_bandwidth_gbs * 1e9 if gpu is not None else None)
    if not fp32_peak or not peak_bytes:
        return None
    flops = compute_s = 0.0
    for precision, weights in FLOP_WEIGHTS.items():
        rates = [(w, _num(k, flop_rate_metric(op))) for op, w in weights.items()]
        if all(r is None for _, r in rates):
            if precision == "fp32":
                return None  # no FLOP counters at all: no roofline
            continue
        done = sum(w * r for w, r in rates if r is not None) * clock * seconds
        flops += done
        compute_s += done / (peak(precision) or fp32_peak)
    return Roof(seconds=seconds, flops=flops, dram_bytes=read + write, peak_flops=fp32_peak, peak_bytes=peak_bytes,
                compute_s=compute_s)


def analyze(d: DiagnosisInput) -> list[Finding]:
    near = meta().bottleneck.near_roof_pct
    roofs = [(k, r) for k in d.kernels() if (r := measure(k, d.gpu)) is not None]
    total_s = sum(r.seconds for _, r in roofs)
    out = []
    for k, r in roofs[:1]:  # the kernel with the most GPU time: one line of where the forward sits, not one per kernel
        at_roof = min(100.0, 100 * r.roof_s / r.seconds)
        reached = at_roof >= near
        share = r.seconds / total_s  # a kernel can save at most its share of the profile's GPU time
        gflops, peak_gflops = r.flops / r.seconds / 1e9, r.peak_flops / 1e9
        gbs, peak_gbs = r.dram_bytes / r.seconds / 1e9, r.peak_bytes / 1e9
        side, what = ("under", "its bytes at peak bandwidth") if r.memory_bound else ("over", "its FLOPs at peak")
        evidence = (f"{'memory' if r.memory_bound else 'compute'}-bound: {_figure(r.intensity)} FLOP per DRAM byte, "
                    f"{side} the ridge of {r.ridge:.1f} (FP32 {peak_gflops / 1e3:.1f} TFLOP/s over "
                    f"{peak_gbs:,.0f} GB/s); {gbs:,.0f} of {peak_gbs:,.0f} GB/s ({100 * gbs / peak_gbs:.0f} %), "
                    f"{gflops:,.0f} of {peak_gflops:,.0f} GFLOP/s ({100 * gflops / peak_gflops:.1f} %); "
                    f"{what} take {r.roof_s * 1e6:,.0f} µs, it took {r.seconds * 1e6:,.0f} µs")
        remedy: Remedy | None
        if r.memory_bound:
            remedy = "fewer-bytes" if reached else "more-bytes-in-flight"
            direction = ("at the memory roof: only fewer bytes make it faster (read each input once, fuse, "
                         "smaller types)" if reached else
                         "the bytes bound it: move them at full bandwidth (more loads in flight, wide contiguous "
                         "loads), and fewer of them")
        else:
            remedy = None
            direction = ("at the compute roof: only less arithmetic makes it faster (cheaper math, an algebraic "
                         "rewrite)" if reached else
                         "the arithmetic bounds it: issue it faster (more warps in flight, fewer stalls, fused "
                         "multiply-adds)")
        out.append(Finding(
            kind="memory-bound" if r.memory_bound else "compute-bound", kernel=k.name, evidence=evidence,
            figures={"flop_per_byte": round(r.intensity, 4), "ridge_flop_per_byte": round(r.ridge, 2),
                     "gflops": round(gflops, 1), "peak_gflops": round(peak_gflops, 1), "gbs": round(gbs, 1),
                     "peak_gbs": round(peak_gbs, 1), "roof_us": round(r.roof_s * 1e6, 1),
                     "duration_us": round(r.seconds * 1e6, 1),
                     "headroom_pct": 0.0 if reached else round(share * (100 - at_roof), 1)},
            remedy=remedy, direction=direction))
    return out
