import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def group_stats_kernel(y_ptr, w_ptr, b_ptr, out_ptr, C, S, G, eps,
                       CPG: tl.constexpr, BLOCK: tl.constexpr):
    """One program per (sample, group): mean/var of the group, then the group's share of the final mean."""
    n = tl.program_id(0)
    g = tl.program_id(1)
    group_elems = CPG * S
    base = y_ptr + (n * C + g * CPG).to(tl.int64) * S
    s1 = tl.zeros((BLOCK,), tl.float32)
    s2 = tl.zeros((BLOCK,), tl.float32)
    for off in range(0, group_elems, BLOCK):
        i = off + tl.arange(0, BLOCK)
        v = tl.load(base + i, mask=i < group_elems, other=0.0)
        s1 += v
        s2 += v * v
    mean = tl.sum(s1, 0) / group_elems
    var = tl.sum(s2, 0) / group_elems - mean * mean
    rstd = tl.math.rsqrt(var + eps)
    # sum over the group's channels of gamma_c * (mean_c - mean) * rstd + beta_c, where mean_c is the channel mean
    total = 0.0
    for j in tl.static_range(CPG):
        c = g * CPG + j
        cs = tl.zeros((BLOCK,), tl.float32)
        for off in range(0, S, BLOCK):
            i = off + tl.arange(0, BLOCK)
            cs += tl.load(base + j * S + i, mask=i < S, other=0.0)
        mc = tl.sum(cs, 0) / S
        total += tl.load(w_ptr + c) * (mc - mean) * rstd + tl.load(b_ptr + c)
    tl.atomic_add(out_ptr + n, total / C)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        y = self.conv(x).contiguous()
        N, C = y.shape[:2]
        S = y[0, 0].numel()
        G = self.norm.num_groups
        out = torch.zeros(N, device=y.device, dtype=torch.float32)
        group_stats_kernel[(N, G)](y, self.norm.weight, self.norm.bias, out, C, S, G, self.norm.eps,
                                   CPG=C // G, BLOCK=1024)
        return out
