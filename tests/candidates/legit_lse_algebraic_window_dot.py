from __future__ import annotations

import torch
import torch.nn as nn
import triton
import triton.language as tl

# mean over output positions of a valid conv = Σ_{i,kh,kw} w[o,i,kh,kw] · mean(x[i, kh:kh+OH, kw:kw+OW]) + b[o]
# so the conv collapses to window means (N, I·K·K) times the weight matrix (I·K·K, O): a tiny GEMM.


@triton.jit
def window_mean_kernel(x_ptr, a_ptr, H, W, OH, OW, inv_area, KK: tl.constexpr, K: tl.constexpr,
                       BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    pid = tl.program_id(0)          # (n, i)
    tap = tl.program_id(1)          # kh * K + kw
    kh = tap // K
    kw = tap % K
    base = x_ptr + pid.to(tl.int64) * H * W
    acc = tl.zeros((BLOCK_H, BLOCK_W), tl.float32)
    for h0 in range(0, OH, BLOCK_H):
        rows = h0 + tl.arange(0, BLOCK_H)
        for w0 in range(0, OW, BLOCK_W):
            cols = w0 + tl.arange(0, BLOCK_W)
            m = (rows[:, None] < OH) & (cols[None, :] < OW)
            acc += tl.load(base + (rows[:, None] + kh) * W + cols[None, :] + kw, mask=m, other=0.0)
    tl.store(a_ptr + pid * KK + tap, tl.sum(tl.sum(acc, axis=1), axis=0) * inv_area)


@triton.jit
def gemm_bias_lse_kernel(a_ptr, w_ptr, b1_ptr, b2_ptr, out_ptr, N, O, R,
                         BLOCK_N: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    ro = tl.arange(0, BLOCK_O)
    acc = tl.zeros((BLOCK_N, BLOCK_O), tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rr = r0 + tl.arange(0, BLOCK_R)
        a = tl.load(a_ptr + rn[:, None] * R + rr[None, :], mask=(rn[:, None] < N) & (rr[None, :] < R), other=0.0)
        # w is (O, R) row-major: load its transpose tile (R, O)
        w = tl.load(w_ptr + ro[None, :] * R + rr[:, None], mask=(rr[:, None] < R) & (ro[None, :] < O), other=0.0)
        acc = tl.dot(a, w, acc, input_precision="ieee")
    bias = tl.load(b1_ptr + ro, mask=ro < O, other=0.0) + tl.load(b2_ptr + ro, mask=ro < O, other=0.0)
    v = tl.where(ro[None, :] < O, acc + bias[None, :], float("-inf"))
    vmax = tl.max(v, axis=1)
    lse = vmax + tl.log(tl.sum(tl.exp(v - vmax[:, None]), axis=1))
    tl.store(out_ptr + rn, lse, mask=rn < N)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.is_contiguous(), "expects NCHW-contiguous input"
        N, I, H, W = x.shape
        O, _, K, _ = self.conv.weight.shape
        OH, OW = H - K + 1, W - K + 1
        R = I * K * K
        a = torch.empty((N, R), device=x.device, dtype=torch.float32)
        window_mean_kernel[(N * I, K * K)](x, a, H, W, OH, OW, 1.0 / (OH * OW), KK=K * K, K=K,
                                           BLOCK_H=16, BLOCK_W=32)
        out = torch.empty((N, 1, 1, 1), device=x.device, dtype=x.dtype)
        BLOCK_N = 16
        gemm_bias_lse_kernel[(triton.cdiv(N, BLOCK_N),)](
            a, self.conv.weight.reshape(O, R), self.conv.bias, self.bias.view(-1), out, N, O, R,
            BLOCK_N=BLOCK_N, BLOCK_O=max(16, triton.next_power_of_2(O)), BLOCK_R=32,
        )
        return out
