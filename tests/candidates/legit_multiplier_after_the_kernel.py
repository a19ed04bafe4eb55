import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def plane_mean_kernel(y_ptr, out_ptr, HW, BLOCK: tl.constexpr):
    # one program per (n, c) plane: the mean of the conv output over H x W
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(y_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) / HW)


class ModelNew(nn.Module):
    """The GAP in Triton; the multiplier applied by PyTorch to the (N, C) result (N*C multiplies, not the work)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, H, W = y.shape
        means = torch.empty((N, C, 1, 1), device=y.device, dtype=torch.float32)
        plane_mean_kernel[(N * C,)](y, means, H * W, BLOCK=256)
        return means * self.multiplier
