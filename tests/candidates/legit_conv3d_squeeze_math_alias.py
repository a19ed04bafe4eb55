from typing import Final

import torch
import torch.nn as nn
import triton
import triton.language as tl
import triton.language.math as tlm
from triton.language import constexpr

DEFAULT_BLOCK: Final[int] = 1024


@triton.jit
def relu_mean_kernel(y_ptr, out_ptr, n_per_row, inv_n, BLOCK: constexpr = 1024):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, n_per_row, BLOCK):
        offs = s + tl.arange(0, BLOCK)
        v = tl.load(y_ptr + row * n_per_row + offs, mask=offs < n_per_row, other=0.0)
        acc += tl.where(v > 0, v, tl.zeros_like(v))
    tl.store(out_ptr + row, tlm.fma(tl.sum(acc, axis=0), inv_n, 0.0))


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.Tensor.contiguous(self.conv(x))
        n, c = y.shape[:2]
        per_row = y[0, 0].numel()
        out = torch.empty((n, c, 1), device=y.device, dtype=torch.float32)
        relu_mean_kernel[(n * c,)](y, out, per_row, 1.0 / per_row, BLOCK=DEFAULT_BLOCK)
        return out.squeeze(-1).to(dtype=x.dtype)
