import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    n = n_a + n_b
    delta = mean_b - mean_a
    w_b = tl.where(n > 0, n_b / tl.maximum(n, 1.0), 0.0)
    mean = mean_a + delta * w_b
    m2 = m2_a + m2_b + delta * delta * n_a * w_b
    return mean, m2, n


@triton.jit
def plane_stats_kernel(z_ptr, mean_ptr, m2_ptr, S, BLOCK: tl.constexpr):
    """One (n, c) volume: per-lane sums of the data shifted by its first value (no cancellation), turned into per-lane
    (mean, M2, count) and merged with tl.reduce and the Welford/Chan combine."""
    pid = tl.program_id(0)
    base = z_ptr + pid.to(tl.int64) * S
    shift = tl.load(base)
    s1 = tl.zeros((BLOCK,), tl.float32)
    s2 = tl.zeros((BLOCK,), tl.float32)
    cnt = tl.zeros((BLOCK,), tl.float32)
    for s0 in range(0, S, BLOCK):
        idx = s0 + tl.arange(0, BLOCK)
        valid = idx < S
        d = tl.where(valid, tl.load(base + idx, mask=valid, other=0.0) - shift, 0.0)
        s1 += d
        s2 += d * d
        cnt += valid.to(tl.float32)
    safe = tl.maximum(cnt, 1.0)
    mean = shift + s1 / safe
    m2 = tl.where(cnt > 0, s2 - s1 * s1 / safe, 0.0)
    mean_t, m2_t, _ = tl.reduce((mean, m2, cnt), 0, welford_combine)
    tl.store(mean_ptr + pid, mean_t)
    tl.store(m2_ptr + pid, m2_t)


@triton.jit
def bn_gap_kernel(mean_ptr, m2_ptr, w_ptr, b_ptr, out_ptr, N, C, S, scale, eps, BLOCK_N: tl.constexpr):
    c = tl.program_id(0)
    n = tl.arange(0, BLOCK_N)
    nm = n < N
    # scale the per-plane moments: BN(scale*z) uses scale*mean and scale^2*M2
    m = tl.load(mean_ptr + n * C + c, mask=nm, other=0.0) * scale
    q = tl.load(m2_ptr + n * C + c, mask=nm, other=0.0) * scale * scale
    cnt = tl.where(nm, S * 1.0, 0.0)
    mu, m2, total = tl.reduce((m, q, cnt), 0, welford_combine)
    rstd = tl.rsqrt(m2 / total + eps)
    y = (m - mu) * rstd * tl.load(w_ptr + c) + tl.load(b_ptr + c)
    tl.store(out_ptr + n * C + c, y, mask=nm)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale_factor, eps=1e-5, momentum=0.1):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor
        self.batch_norm = nn.BatchNorm3d(out_channels, eps=eps, momentum=momentum)
        self.gap = nn.AdaptiveAvgPool3d((1, 1, 1))  # kept for state-dict/module parity; not called

    def forward(self, x):
        z = self.conv_transpose(x).contiguous()
        N, C, D, H, W = z.shape
        S = D * H * W
        mean = torch.empty((N, C), device=z.device, dtype=torch.float32)
        m2 = torch.empty_like(mean)
        plane_stats_kernel[(N * C,)](z, mean, m2, S, BLOCK=128)
        out = z.new_empty((N, C, 1, 1, 1))
        bn_gap_kernel[(C,)](mean, m2, self.batch_norm.weight, self.batch_norm.bias, out, N, C, S,
                            float(self.scale_factor), self.batch_norm.eps, BLOCK_N=max(2, triton.next_power_of_2(N)))
        return out
