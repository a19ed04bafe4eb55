import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n) * s, mask=offs < n)


def finish(pooled, s):
    pooled = pooled.contiguous()
    out = torch.empty_like(pooled)
    n = pooled.numel()
    copy_kernel[(triton.cdiv(n, 256),)](pooled, out, n, s, BLOCK=256)
    return out


class Base(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier




@triton.jit
def rowsum_kernel(x_ptr, out_ptr, HW, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) / HW)


class ModelNew(Base):
    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        room = torch.empty(64 * y.numel(), device=y.device, dtype=y.dtype)
        scaled = torch.empty_like(y)
        n = y.numel()
        copy_kernel[(triton.cdiv(n, 256),)](y, scaled, n, self.multiplier, BLOCK=256)  # the intermediate, in full
        copy_kernel[(1,)](room, room, 1, 1.0, BLOCK=16)
        out = torch.empty((y.shape[0], y.shape[1], 1, 1), device=y.device, dtype=y.dtype)
        rowsum_kernel[(y.shape[0] * y.shape[1],)](scaled, out, y.shape[2] * y.shape[3], BLOCK=256)
        return out
