import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gap_nchw_kernel(x_ptr, out_ptr, HW, inv_hw, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row.to(tl.int64) * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * inv_hw)


@triton.jit
def gap_nhwc_kernel(x_ptr, out_ptr, C, HW, inv_hw, BLOCK_C: tl.constexpr, BLOCK_HW: tl.constexpr):
    n = tl.program_id(0)
    cb = tl.program_id(1)
    cs = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_HW, BLOCK_C), dtype=tl.float32)
    for start in range(0, HW, BLOCK_HW):
        hw = start + tl.arange(0, BLOCK_HW)
        ptrs = x_ptr + n.to(tl.int64) * HW * C + hw[:, None] * C + cs[None, :]
        acc += tl.load(ptrs, mask=(hw[:, None] < HW) & (cs[None, :] < C), other=0.0)
    tl.store(out_ptr + n * C + cs, tl.sum(acc, axis=0) * inv_hw, mask=cs < C)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        N, C, H, W = x.shape
        out = torch.empty((N, C, 1, 1), device=x.device, dtype=torch.float32)
        if x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous():
            gap_nhwc_kernel[(N, triton.cdiv(C, 32))](x, out, C, H * W, 1.0 / (H * W), BLOCK_C=32, BLOCK_HW=64)
        else:
            x = x.contiguous()
            gap_nchw_kernel[(N * C,)](x, out, H * W, 1.0 / (H * W), BLOCK=1024)
        return out if out.dtype == x.dtype else out.to(x.dtype)
