import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gap_bias_kernel(y_ptr, b_ptr, out_ptr, C, HW, inv_hw, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs0 = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + offs0
        acc += tl.load(y_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    c = row % C
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * inv_hw + tl.load(b_ptr + c))


@triton.jit
def lse_kernel(m_ptr, out_ptr, C, BLOCK_C: tl.constexpr):
    n = tl.program_id(0)
    offs = tl.arange(0, BLOCK_C)
    v = tl.load(m_ptr + n * C + offs, mask=offs < C, other=float("-inf"))
    mx = tl.max(v, axis=0)
    # logsumexp = max - log(softmax at the max)
    p = tl.softmax(v)
    pmax = tl.max(tl.where(v == mx, p, 0.0), axis=0)
    tl.store(out_ptr + n, mx - tl.log(pmax))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1))

    def forward(self, x):
        y = self.conv(x).contiguous()
        n, c, h, w = y.shape
        means = torch.empty((n, c), device=y.device, dtype=torch.float32)
        gap_bias_kernel[(n * c,)](y, self.bias, means, c, h * w, 1.0 / (h * w), BLOCK=512)
        out = torch.empty((n, 1, 1, 1), device=y.device, dtype=y.dtype)
        lse_kernel[(n,)](means, out, c, BLOCK_C=triton.next_power_of_2(c))
        return out
