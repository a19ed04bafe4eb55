"""gap44 candidate: PyTorch's ConvTranspose2d, then one Triton program per (n, c) that sums that channel's H*W
plane and scales it by multiplier / (H*W): the multiply and both global average pools in one pass over the
conv's output, read once, written as N*C values. (The second pool averages a 1x1 plane: the identity.)
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gap_rowsum_kernel(x_ptr, out_ptr, scale, HW, BLOCK: tl.constexpr):
    # one program per row of the contiguous [N*C, H*W] view
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * HW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < HW, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


def fused_multiply_gap(x, multiplier):
    x = x.contiguous()
    N, C, H, W = x.shape
    hw = H * W
    out = torch.empty((N, C, 1, 1), device=x.device, dtype=x.dtype)
    block = min(4096, triton.next_power_of_2(hw))
    gap_rowsum_kernel[(N * C,)](x, out, multiplier / hw, hw, BLOCK=block, num_warps=8 if block >= 2048 else 4)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x):
        return fused_multiply_gap(self.conv_transpose(x), self.multiplier)
