import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gap_rows_kernel(x_ptr, out_ptr, R, HW, inv_hw, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """ROWS planes per program; pairs of elements loaded as one 2-wide vector and split (tl.split) before the sum."""
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    rmask = rows < R
    base = x_ptr + rows.to(tl.int64)[:, None] * HW
    acc = tl.zeros((ROWS, BLOCK // 2), tl.float32)
    for s in range(0, HW, BLOCK):
        cols = s + tl.arange(0, BLOCK)
        cols = tl.max_contiguous(tl.multiple_of(cols, BLOCK), BLOCK)
        v = tl.load(base + cols[None, :], mask=rmask[:, None] & (cols[None, :] < HW), other=0.0,
                    eviction_policy="evict_first")
        even, odd = tl.split(tl.reshape(v, (ROWS, BLOCK // 2, 2)))
        acc += even + odd
    total = tl.sum(tl.trans(acc), axis=0)
    tl.store(out_ptr + rows, total * inv_hw, mask=rmask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:
            raise ValueError(f"expected NCHW, got {x.dim()}-D")
        x = x.contiguous()
        N, C, H, W = x.shape
        out = torch.empty((N, C, 1, 1), device=x.device, dtype=x.dtype)
        R = N * C
        ROWS = 4
        gap_rows_kernel[(triton.cdiv(R, ROWS),)](x, out, R, H * W, 1.0 / (H * W), ROWS=ROWS, BLOCK=256)
        return out
