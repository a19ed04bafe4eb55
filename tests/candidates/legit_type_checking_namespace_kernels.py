from __future__ import annotations

import math
import typing
from typing import TYPE_CHECKING, Protocol, cast, overload

import torch
import torch.nn as nn
import triton
import triton.language as tl

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor


class _Launchable(Protocol):
    def __getitem__(self, grid: tuple[int, ...]) -> typing.Callable[..., None]: ...


class Kernels:
    """Kernels grouped in a namespace class (plain @triton.jit functions in the class body)."""

    @triton.jit(noinline=True)
    def _partial(x_ptr, offs, mask):
        return tl.load(x_ptr + offs, mask=mask, other=0.0)

    @triton.jit
    def gap(x_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        tl.device_assert(HW > 0, "empty plane")
        base = x_ptr + row.to(tl.int64) * HW
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, HW, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            acc += Kernels._partial(base, offs, offs < HW)
        tl.debug_barrier()
        tl.atomic_add(out_ptr + row, tl.sum(acc, axis=0) * scale, sem="relaxed")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def extra_repr(self) -> str:
        return f"multiplier={self.multiplier}, triton={triton.__version__}"

    @overload
    def forward(self, x: Tensor) -> Tensor: ...
    @overload
    def forward(self, x: np.ndarray) -> Tensor: ...

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        spatial = y.shape[2:]
        hw = math.prod(spatial)
        out_shape = y.shape[:2] + torch.Size([1, 1])
        out = torch.empty(out_shape, device=y.device, dtype=torch.float32)
        out.zero_()
        kernel = cast(_Launchable, Kernels.gap)
        kernel[(y.shape[0] * y.shape[1],)](y, out, hw, self.multiplier / hw, BLOCK=512, num_warps=4, num_ctas=1)
        return out.to(y.dtype)
