import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_gap_kernel(y_ptr, out_ptr, HW, inv_hw, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for s in range(0, HW, BLOCK):
        o = s + tl.arange(0, BLOCK)
        v = tl.load(y_ptr + pid * HW + o, mask=o < HW, other=0.0)
        inner = 0.7978845608028654 * (v + 0.044715 * v * v * v)
        g = 0.5 * v * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0))   # tanh via sigmoid
        acc += tl.where(o < HW, g, 0.0)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0) * inv_hw)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = self.conv(x).contiguous()
        N, C, H, W = y.shape
        out = torch.empty((N, C), device=y.device, dtype=y.dtype)
        gelu_gap_kernel[(N * C,)](y, out, H * W, 1.0 / (H * W), BLOCK=1024)
        return out
