from __future__ import annotations

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scaled_gap_kernel(x_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    tl.static_assert(BLOCK % 32 == 0)
    base = x_ptr + row.to(tl.int64) * HW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


class _GapEpilogue(nn.Module):
    """× multiplier, then both global average pools (the second is the identity on a 1×1 map)."""

    def __init__(self, multiplier: float, block: int = 1024) -> None:
        super().__init__()
        self.multiplier = float(multiplier)
        self._block = block

    def _launch(self, y: torch.Tensor) -> torch.Tensor:
        N, C, H, W = y.shape
        out = y.new_empty((N, C, 1, 1))
        _scaled_gap_kernel[(N * C,)](y, out, H * W, self.multiplier / (H * W), BLOCK=self._block)
        return out

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self._launch(y.contiguous())


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.epilogue = _GapEpilogue(multiplier)
        self.epilogue._block = 512  # smaller tiles: H*W is a few thousand

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        return self.epilogue._launch(y)
