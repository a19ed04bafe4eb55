import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu(v):
    return 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))


@triton.jit
def nhwc_gelu_gap_kernel(y_ptr, out_ptr, HW, C, inv_hw,
                         BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    """y is channels-last (N, H, W, C in memory): each program owns one image and a block of channels and walks
    the pixels, so each load is a contiguous run of channels."""
    n = tl.program_id(0)
    cb = tl.program_id(1)
    cs = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    cm = cs < C
    base = y_ptr + n.to(tl.int64) * HW * C
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for p0 in range(0, HW, BLOCK_P):
        p = p0 + tl.arange(0, BLOCK_P)
        m = (p[:, None] < HW) & cm[None, :]
        v = tl.load(base + p[:, None] * C + cs[None, :], mask=m, other=0.0)
        acc += tl.where(m, _gelu(v), 0.0)
    tl.store(out_ptr + n * C + cs, tl.sum(acc, axis=0) * inv_hw, mask=cm)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        torch.backends.cudnn.benchmark = True
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        # channels-last weights let cuDNN pick its NHWC kernels, and the conv's output comes out NHWC
        self.conv = self.conv.to(memory_format=torch.channels_last)

    def forward(self, x):
        y = self.conv(x.contiguous(memory_format=torch.channels_last))
        if not y.is_contiguous(memory_format=torch.channels_last):
            y = y.contiguous(memory_format=torch.channels_last)
        N, C, H, W = y.shape
        out = torch.empty((N, C), device=y.device, dtype=y.dtype)
        BLOCK_C = min(64, triton.next_power_of_2(C))
        grid = (N, triton.cdiv(C, BLOCK_C))
        nhwc_gelu_gap_kernel[grid](y, out, H * W, C, 1.0 / (H * W), BLOCK_P=64, BLOCK_C=BLOCK_C)
        return out
