import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def pool_gap_bias_sum_kernel(y_ptr, bias_ptr, out_ptr, C, D, H, W, PD, PH, PW, inv_div,
                             BLOCK: tl.constexpr):
    n = tl.program_id(0)
    P = PD * PH * PW
    win = tl.arange(0, 8)
    dz = win // 4
    dy = (win // 2) % 2
    dx = win % 2
    acc = 0.0
    for c in range(0, C):
        plane = y_ptr + (n * C + c).to(tl.int64) * D * H * W
        s = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, P, BLOCK):
            p = start + tl.arange(0, BLOCK)
            valid = p < P
            pd = p // (PH * PW)
            ph = (p // PW) % PH
            pw = p % PW
            # a [BLOCK, 8] tile: each row one pooling window
            z = 2 * pd[:, None] + dz[None, :]
            yy = 2 * ph[:, None] + dy[None, :]
            xx = 2 * pw[:, None] + dx[None, :]
            v = tl.load(plane + (z * H + yy) * W + xx, mask=valid[:, None], other=float("-inf"))
            mx = tl.max(v, axis=1)
            s += tl.where(valid, mx, 0.0)
        mean = tl.sum(s, axis=0) / P * inv_div
        acc += mean + tl.load(bias_ptr + c)
    tl.store(out_ptr + n, acc)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor, pool_size, bias_shape, sum_dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.divisor = divisor
        self.bias = nn.Parameter(torch.randn(bias_shape))
        assert tuple(pool_size) == (2, 2, 2) and sum_dim == 1

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x).contiguous()
        N, C, D, H, W = y.shape
        out = torch.empty((N, 1, 1, 1), device=y.device, dtype=y.dtype)
        pool_gap_bias_sum_kernel[(N,)](y, self.bias.reshape(-1), out, C, D, H, W, D // 2, H // 2, W // 2,
                                       1.0 / self.divisor, BLOCK=128)
        return out
