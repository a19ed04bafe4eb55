import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gn_mean_kernel(y_ptr, gamma_ptr, beta_ptr, out_ptr, C, S, eps,
                   GROUPS: tl.constexpr, CPG: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    """mean over (C, D, H, W) of GroupNorm(y)[n]: per channel, gamma * (channel mean - group mean) * rstd + beta."""
    n = tl.program_id(0)
    cs = tl.arange(0, BLOCK_C)
    cmask = cs < CPG
    total = tl.zeros((BLOCK_C,), tl.float32)
    for g in range(GROUPS):
        chan = g * CPG + cs
        base = y_ptr + (n * C + chan).to(tl.int64)[:, None] * S
        s1 = tl.zeros((BLOCK_C, BLOCK_S), tl.float32)
        s2 = tl.zeros((BLOCK_C, BLOCK_S), tl.float32)
        for off in range(0, S, BLOCK_S):
            i = off + tl.arange(0, BLOCK_S)
            v = tl.load(base + i[None, :], mask=cmask[:, None] & (i < S)[None, :], other=0.0)
            s1 += v
            s2 += v * v
        ch_sum = tl.sum(s1, axis=1)
        cnt = CPG * S
        mean = tl.sum(ch_sum, 0) / cnt
        var = tl.maximum(tl.sum(tl.sum(s2, axis=1), 0) / cnt - mean * mean, 0.0)
        rstd = 1.0 / tl.sqrt(var + eps)
        w = tl.load(gamma_ptr + chan, mask=cmask, other=0.0)
        b = tl.load(beta_ptr + chan, mask=cmask, other=0.0)
        total += tl.where(cmask, w * (ch_sum / S - mean) * rstd + b, 0.0)
    tl.store(out_ptr + n, tl.sum(total, 0) / C)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        y = self.conv(x).contiguous()
        n, c = y.shape[0], y.shape[1]
        s = y.numel() // (n * c)
        g = self.norm.num_groups
        out = torch.zeros(n, device=y.device, dtype=y.dtype)
        gn_mean_kernel[(n,)](y, self.norm.weight, self.norm.bias, out, c, s, self.norm.eps,
                             GROUPS=g, CPG=c // g, BLOCK_C=triton.next_power_of_2(c // g), BLOCK_S=256)
        return out
