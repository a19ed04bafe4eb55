"""Conv2d + GELU + GAP in one kernel: each program computes a tile of one (n, co) output plane
directly from x and the weights (the conv output is never written), applies the exact (erf) GELU
and reduces it."""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": 256}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=8)],
    key=["OH", "OW", "CI"],
)
@triton.jit
def conv_gelu_gap_kernel(x_ptr, w_ptr, b_ptr, out_ptr, CI, H, W, OH, OW, CO, inv_area,
                         K: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    n = pid // CO
    co = pid % CO
    bias = tl.load(b_ptr + co)
    total = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, OH * OW, BLOCK):
        p = start + tl.arange(0, BLOCK)
        pm = p < OH * OW
        oh = p // OW
        ow = p % OW
        acc = tl.zeros((BLOCK,), tl.float32) + bias
        for ci in range(0, CI):
            xb = x_ptr + (n * CI + ci).to(tl.int64) * H * W
            wb = w_ptr + (co * CI + ci) * K * K
            for kh in tl.static_range(K):
                for kw in tl.static_range(K):
                    xv = tl.load(xb + (oh + kh) * W + (ow + kw), mask=pm, other=0.0)
                    acc += xv * tl.load(wb + kh * K + kw)
        g = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
        total += tl.where(pm, g, 0.0)
    tl.store(out_ptr + pid, tl.sum(total, axis=0) * inv_area)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = x.contiguous()
        N, CI, H, W = x.shape
        K = self.conv.kernel_size[0]
        CO = self.conv.out_channels
        OH, OW = H - K + 1, W - K + 1
        out = torch.empty((N, CO), device=x.device, dtype=x.dtype)
        conv_gelu_gap_kernel[(N * CO,)](x, self.conv.weight, self.conv.bias, out, CI, H, W, OH, OW, CO,
                                        1.0 / (OH * OW), K=K)
        return out
