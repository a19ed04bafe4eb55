from __future__ import annotations

import abc
import dataclasses
import functools
from typing import ClassVar, Final, Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

torch.set_grad_enabled(False)


@triton.jit
def gap_kernel(y_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    plane = tl.program_id(axis=0)
    base = y_ptr + plane.to(tl.int64) * HW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + plane, tl.sum(acc, axis=0) * scale)


@dataclasses.dataclass
class Plan:
    block: int = 1024
    warps: int = 4
    tags: list[str] = dataclasses.field(default_factory=list)


class Epilogue(abc.ABC):
    kind: ClassVar[str] = "base"

    @abc.abstractmethod
    def __call__(self, y: torch.Tensor) -> torch.Tensor: ...


class GapEpilogue(Epilogue):
    kind: ClassVar[str] = "gap"
    MAX_BLOCK: Final = 4096

    def __init__(self, scale: float, mode: Literal["mean"] = "mean") -> None:
        self.scale = scale
        self.plan = dataclasses.replace(Plan(), block=1024)

    def __call__(self, y: torch.Tensor) -> torch.Tensor:
        N, C, H, W = y.shape
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=y.dtype)
        print(f"[ModelNew] gap over {N * C} planes of {H}x{W}, plan={dataclasses.asdict(self.plan)}")
        gap_kernel[(N * C,)](y, out, H * W, self.scale / (H * W), BLOCK=self.plan.block,
                             num_warps=self.plan.warps)
        return out


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = torch.tensor(multiplier)
        self.eval()

    @functools.cached_property
    def epilogue(self) -> GapEpilogue:
        return GapEpilogue(self.multiplier.item())

    def forward(self, x):
        ct = self.conv_transpose
        y = F.conv_transpose2d(x, ct.weight.data, ct.bias.detach(), ct.stride, ct.padding, ct.output_padding)
        return self.epilogue(y.contiguous())
