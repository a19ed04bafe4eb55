import torch
import torch.nn as nn
import triton
import triton.language as tl
from functools import lru_cache


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 512}, num_warps=8)],
                 key=["HW"])
@triton.heuristics({"EVEN": lambda args: args["HW"] % args["BLOCK"] == 0})
@triton.jit
def gap_tuned(inp, res, HW, scale, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        if EVEN:
            acc += tl.load(inp + row * HW + offs)
        else:
            acc += tl.load(inp + row * HW + offs, mask=offs < HW, other=0.0)
    tl.store(res + row, tl.sum(acc, axis=0) * scale)


@lru_cache(maxsize=None)
def inv(n: int) -> float:
    return 1.0 / n


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
        res = torch.empty((N, C, 1, 1), device=y.device, dtype=y.dtype)
        gap_tuned[(N * C,)](y, res, H * W, self.multiplier * inv(H * W))
        return res
