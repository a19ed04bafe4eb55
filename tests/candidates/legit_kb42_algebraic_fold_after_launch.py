import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def plane_sum_kernel(x_ptr, s_ptr, HW, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(0, HW, BLOCK):
        o = i + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + pid.to(tl.int64) * HW + o, mask=o < HW, other=0.0)
    tl.store(s_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def head_kernel(s_ptr, wsum_ptr, cb_ptr, b_ptr, out_ptr, CI, CO, inv_area,
                BLOCK_CI: tl.constexpr, BLOCK_CO: tl.constexpr):
    n = tl.program_id(0)
    ci = tl.arange(0, BLOCK_CI)
    co = tl.arange(0, BLOCK_CO)
    s = tl.load(s_ptr + n * CI + ci, mask=ci < CI, other=0.0)
    w = tl.load(wsum_ptr + ci[:, None] * CO + co[None, :], mask=(ci[:, None] < CI) & (co[None, :] < CO), other=0.0)
    m = tl.sum(s[:, None] * w, axis=0) * inv_area
    z = m + tl.load(cb_ptr + co, mask=co < CO, other=0.0) + tl.load(b_ptr + co, mask=co < CO, other=0.0)
    z = tl.where(co < CO, z, float("-inf"))
    mx = tl.max(z, axis=0)
    lse = mx + tl.log(tl.sum(tl.exp(z - mx), axis=0))
    tl.store(out_ptr + n, lse * 10.0)


class ModelNew(nn.Module):
    """mean(convT(x)) for stride 1, no padding: every input pixel meets every tap inside the output, so
    GAP = (sum over space of x) @ (sum over taps of W) / (Ho * Wo) + conv bias."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        ct = self.conv_transpose
        assert ct.stride == (1, 1) and ct.padding == (0, 0)
        x = x.contiguous()
        N, CI, H, W = x.shape
        KH, KW = ct.kernel_size
        CO = ct.out_channels
        sums = torch.empty((N, CI), device=x.device, dtype=torch.float32)
        plane_sum_kernel[(N * CI,)](x, sums, H * W, BLOCK=1024)
        # the taps folded after the first launch: PyTorch on the weights only (they are the module's, unchanged)
        wsum = ct.weight.sum(dim=(2, 3)).contiguous()  # (CI, CO)
        out = torch.empty((N, 1), device=x.device, dtype=x.dtype)
        head_kernel[(N,)](sums, wsum, ct.bias, self.bias, out, CI, CO, 1.0 / ((H + KH - 1) * (W + KW - 1)),
                          BLOCK_CI=triton.next_power_of_2(CI), BLOCK_CO=triton.next_power_of_2(CO))
        return out
