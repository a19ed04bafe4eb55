import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gap_c_kernel(x_ptr, out_ptr, C, HW, scale, BLOCK: tl.constexpr):
    n = tl.program_id(0)
    c = tl.program_id(1)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + (n * C + c) * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + n * C + c, tl.sum(acc, axis=0) * scale)


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
        out = torch.zeros((N, C, 1, 1), device=y.device, dtype=y.dtype)
        gap_c_kernel[(N, min(C, 64))](y, out, C, H * W, self.multiplier / (H * W), BLOCK=256)
        return out
