import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def group_stats_kernel(y_ptr, w_ptr, b_ptr, out_ptr, C, G, S, eps,
                       CPG: tl.constexpr, BLOCK: tl.constexpr):
    """One program per (sample, group): sum and sum of squares in one pass, then the group's
    contribution to the sample's mean of GroupNorm's output."""
    n = tl.program_id(0)
    g = tl.program_id(1)
    L = CPG * S
    base = y_ptr + (n.to(tl.int64) * C + g * CPG) * S
    s1 = tl.zeros((BLOCK,), tl.float32)
    s2 = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, L, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(base + offs, mask=offs < L, other=0.0)
        s1 += v
        s2 += v * v
    mean = tl.sum(s1, axis=0) / L
    var = tl.maximum(tl.sum(s2, axis=0) / L - mean * mean, 0.0)
    rstd = tl.rsqrt(var + eps)
    # mean over space of the normalized channel c is (mean_c - mean) * rstd
    contrib = 0.0
    for j in range(CPG):
        cbase = base + j * S
        acc = tl.zeros((BLOCK,), tl.float32)
        for start in range(0, S, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            acc += tl.load(cbase + offs, mask=offs < S, other=0.0)
        mc = tl.sum(acc, axis=0) / S
        c = g * CPG + j
        contrib += tl.load(w_ptr + c) * (mc - mean) * rstd + tl.load(b_ptr + c)
    tl.atomic_add(out_ptr + n, contrib / C)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        y = self.conv(x).contiguous()
        N, C = y.shape[0], y.shape[1]
        S = y[0, 0].numel()
        G = self.norm.num_groups
        out = torch.zeros(N, device=y.device, dtype=torch.float32)
        group_stats_kernel[(N, G)](y, self.norm.weight, self.norm.bias, out, C, G, S, self.norm.eps,
                                   CPG=C // G, BLOCK=1024)
        return out.to(y.dtype)
