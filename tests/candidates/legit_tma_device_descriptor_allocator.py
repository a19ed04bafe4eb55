import torch
import torch.nn as nn
import triton
import triton.language as tl
from typing import Optional


def alloc_fn(size: int, alignment: int, stream: Optional[int]):
    # workspace for device-side tensor descriptors (Triton asks for it at launch)
    return torch.empty(size, device="cuda", dtype=torch.int8)


@triton.jit
def gap_kernel(x_ptr, out_ptr, NC, HW, scale, BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr):
    pid = tl.program_id(0)
    x_desc = tl.make_tensor_descriptor(base=x_ptr, shape=[NC, HW], strides=[HW, 1], block_shape=[BLOCK_R, BLOCK_HW])
    acc = tl.zeros((BLOCK_R, BLOCK_HW), dtype=tl.float32)
    off_r = pid * BLOCK_R
    for k in range(0, tl.cdiv(HW, BLOCK_HW)):
        acc += x_desc.load([off_r, k * BLOCK_HW])
    rows = off_r + tl.arange(0, BLOCK_R)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1) * scale, mask=rows < NC)


@triton.jit
def gap_ptr_kernel(x_ptr, out_ptr, NC, HW, scale, BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr):
    # TMA needs 16-byte aligned rows: other shapes take plain pointers
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK_R, BLOCK_HW), dtype=tl.float32)
    for k in range(0, HW, BLOCK_HW):
        cols = k + tl.arange(0, BLOCK_HW)
        acc += tl.load(x_ptr + rows[:, None] * HW + cols[None, :],
                       mask=(rows[:, None] < NC) & (cols[None, :] < HW), other=0.0)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1) * scale, mask=rows < NC)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = multiplier
        if torch.cuda.is_available():
            triton.set_allocator(alloc_fn)

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, H, W = y.shape
        out = torch.empty(N, C, 1, 1, device=y.device, dtype=y.dtype)
        kernel = gap_kernel if (H * W * y.element_size()) % 16 == 0 else gap_ptr_kernel
        kernel[(triton.cdiv(N * C, 16),)](y, out, N * C, H * W, self.multiplier / (H * W), BLOCK_R=16, BLOCK_HW=32)
        return out
