import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    import triton.tools.tensor_descriptor as td
    HAS_TMA = True
except ImportError:  # older Triton
    td = None
    HAS_TMA = False


@triton.jit
def gap_desc_kernel(x_desc, out_ptr, NC, HW, scale, BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK_R, BLOCK_HW), dtype=tl.float32)
    for k in tl.range(0, HW, BLOCK_HW, num_stages=2):
        acc += tl.load_tensor_descriptor(x_desc, [pid * BLOCK_R, k]).to(tl.float32)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
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


def _hopper(t: torch.Tensor) -> bool:
    return t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def fused_scale_gap(x: torch.Tensor, multiplier: float, block_r: int = 8, block_hw: int = 64) -> torch.Tensor:
    x = x.contiguous()
    N, C, H, W = x.shape
    NC, HW = N * C, H * W
    out = torch.empty((N, C, 1, 1), device=x.device, dtype=x.dtype)
    x2 = x.view(NC, HW)
    # TMA on Hopper; the interpreter reads a descriptor too, so the same kernel runs everywhere
    grid = (triton.cdiv(NC, block_r),)
    if HAS_TMA and (HW * x.element_size()) % 16 == 0:
        desc = td.TensorDescriptor(x2, shape=[NC, HW], strides=[HW, 1], block_shape=[block_r, block_hw])
        gap_desc_kernel[grid](desc, out, NC, HW, multiplier / HW, BLOCK_R=block_r, BLOCK_HW=block_hw)
    else:
        gap_ptr_kernel[grid](x2, out, NC, HW, multiplier / HW, BLOCK_R=block_r, BLOCK_HW=block_hw)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = multiplier

    def forward(self, x):
        return fused_scale_gap(self.conv_transpose(x), self.multiplier)
