import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def energy_tanh_kernel(x_ptr, out_ptr, L, H, BLOCK_L: tl.constexpr, BLOCK_H: tl.constexpr):
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    acc = tl.zeros((BLOCK_H,), dtype=tl.float32)
    for start in range(0, L, BLOCK_L):  # every row of the sequence
        rows = start + tl.arange(0, BLOCK_L)
        mask = (rows[:, None] < L) & (cols[None, :] < H)
        v = tl.load(x_ptr + b * L * H + rows[:, None] * H + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(v * v, axis=0)
    # tanh of a sum of squares (>= 0): its series where exp would cancel, exp's form past it
    e = tl.exp(-2.0 * acc)
    a2 = acc * acc
    small = acc * (1.0 - a2 * (1.0 / 3.0 - a2 * (2.0 / 15.0)))
    tl.store(out_ptr + b * H + cols, tl.where(acc < 0.01, small, (1.0 - e) / (1.0 + e)), mask=cols < H)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        B, L, H = x.shape
        out = torch.empty((B, H), device=x.device, dtype=x.dtype)
        energy_tanh_kernel[(B, triton.cdiv(H, 32))](x, out, L, H, BLOCK_L=64, BLOCK_H=32)
        return out
