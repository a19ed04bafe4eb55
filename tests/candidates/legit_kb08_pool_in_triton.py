from __future__ import annotations

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 256}, num_warps=8)],
    key=["PD", "PH", "PW"],
    reset_to_zero=["out_ptr"],
)
@triton.jit
def maxpool_gap_bias_sum_kernel(
    y_ptr, bias_ptr, out_ptr,
    C, D, H, W, PD, PH, PW,
    inv_div, inv_count,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, BLOCK: tl.constexpr,
):
    """One program per (n, c): the mean of the 2x2x2 window maxima over the pooled grid (floor mode), divided,
    plus the channel's bias; the channels are summed into out[n] with atomics."""
    pid = tl.program_id(0)
    n = pid // C
    c = pid % C
    base = y_ptr + pid.to(tl.int64) * D * H * W
    total = PD * PH * PW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, total, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        valid = idx < total
        pw = idx % PW
        ph = (idx // PW) % PH
        pd = idx // (PW * PH)
        m = tl.full((BLOCK,), float("-inf"), tl.float32)
        for kd in tl.static_range(KD):
            for kh in tl.static_range(KH):
                for kw in tl.static_range(KW):
                    off = ((pd * KD + kd) * H + (ph * KH + kh)) * W + (pw * KW + kw)
                    v = tl.load(base + off, mask=valid, other=float("-inf"))
                    m = tl.maximum(m, v)
        acc += tl.where(valid, m, 0.0)
    val = tl.sum(acc, axis=0) * inv_count * inv_div + tl.load(bias_ptr + c)
    tl.atomic_add(out_ptr + n, val)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor, pool_size, bias_shape, sum_dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.divisor = divisor
        self.pool_size = tuple(pool_size) if isinstance(pool_size, (tuple, list)) else (pool_size,) * 3
        self.bias = nn.Parameter(torch.randn(bias_shape))
        if sum_dim != 1:
            raise ValueError("this kernel sums over channels (sum_dim=1)")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x).contiguous()
        N, C, D, H, W = y.shape
        KD, KH, KW = self.pool_size
        PD, PH, PW = D // KD, H // KH, W // KW
        out = torch.zeros((N, 1, 1, 1), device=y.device, dtype=torch.float32)
        # max(y / d) == max(y) / d for d > 0; the bias is per channel
        maxpool_gap_bias_sum_kernel[(N * C,)](
            y, self.bias, out, C, D, H, W, PD, PH, PW, 1.0 / self.divisor, 1.0 / (PD * PH * PW),
            KD=KD, KH=KH, KW=KW,
        )
        return out.to(y.dtype)
