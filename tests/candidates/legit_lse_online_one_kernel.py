import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gap_bias_lse_kernel(x_ptr, bias_ptr, out_ptr, C, HW, inv_hw,
                        BLOCK_C: tl.constexpr, BLOCK_HW: tl.constexpr):
    n = tl.program_id(0)
    run_max = float("-inf")
    run_sum = 0.0
    for c0 in range(0, C, BLOCK_C):
        cs = c0 + tl.arange(0, BLOCK_C)
        cmask = cs < C
        acc = tl.zeros((BLOCK_C, BLOCK_HW), dtype=tl.float32)
        for h0 in range(0, HW, BLOCK_HW):
            hw = h0 + tl.arange(0, BLOCK_HW)
            ptrs = x_ptr + (n * C + cs[:, None]).to(tl.int64) * HW + hw[None, :]
            acc += tl.load(ptrs, mask=cmask[:, None] & (hw[None, :] < HW), other=0.0)
        v = tl.sum(acc, axis=1) * inv_hw + tl.load(bias_ptr + cs, mask=cmask, other=0.0)
        v = tl.where(cmask, v, float("-inf"))
        new_max = tl.maximum(run_max, tl.max(v, axis=0))
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.sum(tl.exp(v - new_max), axis=0)
        run_max = new_max
    tl.store(out_ptr + n, run_max + tl.log(run_sum))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if not y.is_contiguous():
            y = y.contiguous()
        N, C, H, W = y.shape
        out = x.new_empty((N, 1, 1, 1))
        gap_bias_lse_kernel[(N,)](y, self.bias, out, C, H * W, 1.0 / math.prod((H, W)), BLOCK_C=16, BLOCK_HW=256)
        return out
