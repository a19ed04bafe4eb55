import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_max_kernel(y_ptr, mean_ptr, max_ptr, HW, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    hi = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(y_ptr + row * HW + offs, mask=offs < HW, other=0.0)
        acc += v
        hi = tl.maximum(hi, tl.where(offs < HW, v, float("-inf")))
    tl.store(mean_ptr + row, tl.sum(acc, axis=0) / HW)
    tl.store(max_ptr + row, tl.max(hi, axis=0))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        y = self.conv(x).contiguous()
        N, C, H, W = y.shape
        mean = torch.empty((N, C), device=y.device, dtype=y.dtype)
        peak = torch.empty((N, C), device=y.device, dtype=y.dtype)
        mean_max_kernel[(N * C,)](y, mean, peak, H * W, BLOCK=1024)
        return mean, peak
