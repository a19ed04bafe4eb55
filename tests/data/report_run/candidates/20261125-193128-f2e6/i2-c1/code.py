import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_then_pool_kernel(x_ptr, tmp_ptr, out_ptr, HW, multiplier, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < HW
        x = tl.load(x_ptr + row * HW + offs, mask=mask, other=0.0)
        # intermediate written out and read back: exactly what memory-fusion forbids
        tl.store(tmp_ptr + row * HW + offs, x * multiplier, mask=mask)
        y = tl.load(tmp_ptr + row * HW + offs, mask=mask, other=0.0)
        acc += y
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
        scale_then_pool_kernel[(N * C,)](y, tmp, out, H * W, self.multiplier, BLOCK=256)
        return out
