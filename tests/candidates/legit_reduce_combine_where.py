from typing import Tuple

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def gap_reduce_kernel(x_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        inside = offs < HW
        v = tl.load(x_ptr + row * HW + offs, mask=inside)
        acc += tl.where(inside, v, 0.0)
    total = tl.reduce(acc, 0, _add)
    tl.store(out_ptr + row, total * scale)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def _launch(self, y: torch.Tensor) -> Tuple[torch.Tensor, int, int]:
        N, C, H, W = y.shape
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=torch.float32)
        gap_reduce_kernel[(N * C,)](y, out, H * W, self.multiplier / (H * W), BLOCK=256)
        return out, N, C

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv_transpose(x)
        assert y.dim() == 4, "expected NCHW"
        out, _, _ = self._launch(y.contiguous())
        return out.to(x.dtype)
