from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.utils.parametrize as P
import triton
import triton.language as tl


@triton.jit
def gap_scale_kernel(y_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = y_ptr + row.to(tl.int64) * HW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)




class _Identity(nn.Module):
    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w


@dataclass(eq=False)
class GapScale(nn.Module):
    multiplier: float
    block: int = 1024

    def __post_init__(self) -> None:
        super().__init__()

    def __call__(self, y: torch.Tensor) -> torch.Tensor:
        y = y.contiguous()
        N, C, H, W = y.shape
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=y.dtype)
        gap_scale_kernel[(N * C,)](y, out, H * W, self.multiplier / (H * W), BLOCK=self.block)
        return out


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        ref = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                                 output_padding=output_padding)
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.conv_transpose.weight = nn.Parameter(ref.weight.detach().clone())
        self.conv_transpose.bias = nn.Parameter(ref.bias.detach().clone())
        P.register_parametrization(self.conv_transpose, "weight", _Identity())
        self.epilogue = GapScale(multiplier)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.epilogue(self.conv_transpose(x))
