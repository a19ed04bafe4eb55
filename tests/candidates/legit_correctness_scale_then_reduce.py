import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, m, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * m, mask=mask)


@triton.jit
def mean_kernel(y_ptr, out_ptr, HW, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(y_ptr + row * HW + offs, mask=offs < HW, other=0.0)
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
        scaled = torch.empty_like(y)
        n = y.numel()
        scale_kernel[(triton.cdiv(n, 1024),)](y, scaled, n, self.multiplier, BLOCK=1024)
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=y.dtype)
        mean_kernel[(N * C,)](scaled, out, H * W, BLOCK=256)
        # the second global average pool over a 1x1 map is the identity
        return out
