import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scatter_kernel(x_ptr, tmp_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(tmp_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)


@triton.jit
def mean_kernel(t_ptr, out_ptr, HW, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(t_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) / HW)


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
        tmp = torch.zeros_like(y)
        scatter_kernel[(triton.cdiv(y.numel(), 1024),)](y, tmp, y.numel(), self.multiplier, BLOCK=1024)
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=y.dtype)
        mean_kernel[(N * C,)](tmp, out, H * W, BLOCK=256)
        return out
