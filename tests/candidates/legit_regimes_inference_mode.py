from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn as nn
import triton
import triton.language as tl


@dataclass(frozen=True)
class LaunchCfg:
    block: int = 1024
    num_warps: int = 4
    small_hw: int = 4096
    split: int = 8
    tags: tuple = field(default_factory=tuple)


@triton.jit
def gap_single_tile(x_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(v, axis=0) * scale)


@triton.jit
def gap_split_atomic(x_ptr, out_ptr, HW, CHUNK, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    part = tl.program_id(1)
    lo = part * CHUNK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, CHUNK, BLOCK):
        offs = lo + start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row.to(tl.int64) * HW + offs, mask=(offs < HW) & (start + tl.arange(0, BLOCK) < CHUNK),
                       other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int,
                 output_padding: int, multiplier: float, cfg: Optional[LaunchCfg] = None) -> None:
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier: float = multiplier
        self.cfg = cfg or LaunchCfg()

    @torch.inference_mode()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv_transpose(x)
        y = y if y.is_contiguous() else y.contiguous()
        N, C, H, W = y.shape
        hw: int = H * W
        scale = self.multiplier / hw
        if hw <= self.cfg.small_hw:
            out = torch.empty(N * C, device=y.device, dtype=torch.float32)
            gap_single_tile[(N * C,)](y, out, hw, scale, BLOCK=triton.next_power_of_2(hw),
                                      num_warps=self.cfg.num_warps)
        else:
            out = torch.zeros(N * C, device=y.device, dtype=torch.float32)
            chunk = triton.cdiv(hw, self.cfg.split)
            gap_split_atomic[(N * C, self.cfg.split)](y, out, hw, chunk, scale, BLOCK=self.cfg.block)
        return out.view(N, C, 1, 1).to(x.dtype)
