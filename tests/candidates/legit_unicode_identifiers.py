# -*- coding: utf-8 -*-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gap_kernel(y_ptr, out_ptr, HW, α, BLOCK: tl.constexpr):
    """Σ over H×W → mean × α  (ü, 中文, 🚀)"""
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)  # 累加器 — fp32
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(y_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    μ = tl.sum(acc, axis=0) / HW
    tl.store(out_ptr + row, μ * α)


class ModelNew(nn.Module):
    """ConvTranspose2d → ×α → GAP → GAP (the second is the identity on 1×1)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.α = multiplier

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        n, c, h, w = y.shape
        out = torch.empty((n, c, 1, 1), device=y.device, dtype=y.dtype)
        gap_kernel[(n * c,)](y, out, h * w, self.α, BLOCK=256)
        return out
