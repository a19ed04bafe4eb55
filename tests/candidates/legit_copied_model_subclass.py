import warnings

import torch
import torch.nn as nn
import triton
import triton.language as tl

__version__ = "0.2.0"
torch.manual_seed(42)
warnings.filterwarnings("ignore", category=UserWarning)


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x):
        x = self.conv_transpose(x)
        x = x * self.multiplier
        x = torch.mean(x, dim=[2, 3], keepdim=True)
        x = torch.mean(x, dim=[2, 3], keepdim=True)
        return x


@triton.jit
def gap_kernel(x_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


class ModelNew(Model):
    """Same parameters as Model (inherited __init__); only forward changes."""

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        n, c, h, w = y.shape
        out = torch.empty((n, c, 1, 1), device=y.device, dtype=y.dtype)
        gap_kernel[(n * c,)](y, out, h * w, self.multiplier / (h * w), BLOCK=512)
        return out


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
multiplier = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width).cuda()]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier]
