import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def gap_tma_kernel(x_desc, out_ptr, NC, HW, scale,
                   BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK_R, BLOCK_HW), dtype=tl.float32)
    for k in range(0, HW, BLOCK_HW):
        acc += x_desc.load([pid * BLOCK_R, k]).to(tl.float32)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1) * scale, mask=rows < NC)


@triton.jit
def gap_ptr_kernel(x_ptr, out_ptr, NC, HW, scale, BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK_R, BLOCK_HW), dtype=tl.float32)
    for k in range(0, HW, BLOCK_HW):
        cols = k + tl.arange(0, BLOCK_HW)
        m = (rows[:, None] < NC) & (cols[None, :] < HW)
        acc += tl.load(x_ptr + rows[:, None] * HW + cols[None, :], mask=m, other=0.0)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1) * scale, mask=rows < NC)


def fused_scale_gap(x, multiplier):
    x = x.contiguous()
    N, C, H, W = x.shape
    NC, HW = N * C, H * W
    out = torch.empty((N, C, 1, 1), device=x.device, dtype=x.dtype)
    BLOCK_R, BLOCK_HW = 4, 64
    grid = (triton.cdiv(NC, BLOCK_R),)
    x2 = x.view(NC, HW)
    if x.is_cuda and (HW * x.element_size()) % 16 == 0:
        desc = TensorDescriptor.from_tensor(x2, [BLOCK_R, BLOCK_HW])
        gap_tma_kernel[grid](desc, out, NC, HW, multiplier / HW, BLOCK_R=BLOCK_R, BLOCK_HW=BLOCK_HW)
    else:
        gap_ptr_kernel[grid](x2, out, NC, HW, multiplier / HW, BLOCK_R=BLOCK_R, BLOCK_HW=BLOCK_HW)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = multiplier

    def forward(self, x):
        return fused_scale_gap(self.conv_transpose(x), self.multiplier)
