import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def spill(tmp_ptr, offs, v, m):
    tl.store(tmp_ptr + offs, v, mask=m)


@triton.jit
def fused_kernel(x_ptr, tmp_ptr, out_ptr, HW, s, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, HW, BLOCK):
        offs = row * HW + start + tl.arange(0, BLOCK)
        m = start + tl.arange(0, BLOCK) < HW
        spill(tmp_ptr, offs, tl.load(x_ptr + offs, mask=m, other=0.0) * s, m)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        idx = row * HW + start + tl.arange(0, BLOCK)
        acc += tl.load(tmp_ptr + idx, mask=start + tl.arange(0, BLOCK) < HW, other=0.0)
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
        tmp = torch.empty_like(y)
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=y.dtype)
        fused_kernel[(N * C,)](y, tmp, out, H * W, self.multiplier, BLOCK=256)
        return out
