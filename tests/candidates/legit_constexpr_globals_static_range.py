import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_HW: tl.constexpr = tl.constexpr(512)
UNROLL: tl.constexpr = tl.constexpr(4)


@triton.jit
def _tile_sum(ptr, start, n, BLOCK: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)
    return tl.sum(tl.load(ptr + offs, mask=offs < n, other=0.0), axis=0)


@triton.jit
def gap_unrolled_kernel(x_ptr, out_ptr, HW, scale):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * HW
    total = 0.0
    step = BLOCK_HW * UNROLL
    for start in range(0, HW, step):
        for u in tl.static_range(UNROLL):
            total += _tile_sum(base, start + u * BLOCK_HW, HW, BLOCK_HW)
    tl.store(out_ptr + row, tl.math.fma(total, scale, 0.0))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, H, W = y.shape
        hw = math.prod((H, W))
        out = torch.empty_like(y[:, :, :1, :1])
        gap_unrolled_kernel[(N * C,)](y, out, hw, self.multiplier / hw)
        return out
