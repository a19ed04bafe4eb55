import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gap_bias_kernel(y_ptr, b_ptr, out_ptr, C, HW, BLOCK: tl.constexpr):
    # one program per (n, c): mean over the plane plus the bias
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(y_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) / HW + tl.load(b_ptr + row % C))


class ModelNew(nn.Module):
    """GAP + bias in Triton into an (N, C) buffer; the logsumexp over C and the size-1 dims left to PyTorch."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1))

    def forward(self, x):
        y = self.conv(x).contiguous()
        N, C, H, W = y.shape
        pooled = torch.empty((N, C, 1, 1), device=y.device, dtype=torch.float32)
        gap_bias_kernel[(N * C,)](y, self.bias.reshape(-1).contiguous(), pooled, C, H * W, BLOCK=256)
        return torch.logsumexp(pooled, dim=1, keepdim=True)
