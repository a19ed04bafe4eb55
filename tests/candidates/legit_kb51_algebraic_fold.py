"""KernelBench #51, algebraically: mean_j(x . W_j + b_j - s_j) = x . mean_j(W_j) + mean_j(b_j - s_j).

The (out_features x in_features) GEMM collapses to a GEMV against the column-mean of W, folded once in __init__
(weights are constant at inference), so the forward reads x once and writes the output once.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_K": 256}, num_warps=2),
        triton.Config({"BLOCK_K": 1024}, num_warps=4),
        triton.Config({"BLOCK_K": 2048}, num_warps=8),
    ],
    key=["K"],
)
@triton.jit
def fused_gemv_gelu_residual(x_ptr, wbar_ptr, c_ptr, out_ptr, K, stride_x, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    xr = x_ptr + row.to(tl.int64) * stride_x
    acc = tl.zeros([BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        k = tl.max_contiguous(tl.multiple_of(k, BLOCK_K), BLOCK_K)
        mk = k < K
        acc += tl.load(xr + k, mask=mk, other=0.0) * tl.load(wbar_ptr + k, mask=mk, other=0.0)
    m = tl.sum(acc, axis=0) + tl.load(c_ptr)
    g = 0.5 * m * (1.0 + tl.erf(m * 0.7071067811865476))
    orow = out_ptr + row.to(tl.int64) * stride_x
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        mk = k < K
        tl.store(orow + k, tl.load(xr + k, mask=mk) + g, mask=mk)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)
        self.subtract = nn.Parameter(torch.randn(out_features))
        self.register_buffer("w_bar", torch.empty(in_features), persistent=False)
        self.register_buffer("c", torch.empty(1), persistent=False)
        self._fold()
        # the harness (like KernelBench) may load the reference weights after construction: refold then
        self.gemm.register_load_state_dict_post_hook(lambda *_: self._fold())
        self._register_load_state_dict_pre_hook(lambda *a, **k: None)

    @torch.no_grad()
    def _fold(self):
        self.w_bar.copy_(self.gemm.weight.mean(dim=0))
        b = self.gemm.bias if self.gemm.bias is not None else torch.zeros_like(self.subtract)
        self.c.copy_((b - self.subtract).mean().reshape(1))

    def load_state_dict(self, *args, **kwargs):
        result = super().load_state_dict(*args, **kwargs)
        self._fold()
        return result

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        B, K = x.shape
        fused_gemv_gelu_residual[(B,)](x, self.w_bar, self.c, out, K, x.stride(0))
        return out
