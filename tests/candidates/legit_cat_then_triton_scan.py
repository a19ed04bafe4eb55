import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_scan_kernel(src_ptr, out_ptr, n_cols, stride_src, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(src_ptr + row * stride_src + cols, mask=mask, other=0.0)
        s = tl.cumsum(v, axis=0) + carry
        tl.store(out_ptr + row * stride_out + cols, s, mask=mask)
        carry = carry + tl.sum(v, axis=0)


class ModelNew(nn.Module):
    """The Model's own torch.cat and [:-1] in PyTorch (index-only copies), the prefix sum in Triton, row by row."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        assert self.dim == 1 and x.dim() == 2
        shifted = torch.cat((torch.zeros_like(x[:, :1]), x), dim=1)[:-1].contiguous()
        out = torch.empty_like(shifted)
        rows, cols = shifted.shape
        if rows:
            row_scan_kernel[(rows,)](shifted, out, cols, shifted.stride(0), out.stride(0), BLOCK=256)
        return out
