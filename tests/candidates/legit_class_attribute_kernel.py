import torch
import torch.nn as nn
import triton
import triton.language as tl


class GapOps:
    @staticmethod
    @triton.jit
    def mean_rows(src, dst, n_cols, scale, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for off in range(0, n_cols, BLOCK):
            idx = off + cols
            acc += tl.load(src + pid * n_cols + idx, mask=idx < n_cols, other=0.0).to(tl.float32)
        tl.store(dst + pid, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv_transpose(x).contiguous()
        n, c, h, w = y.shape
        out = y.new_empty((n * c,))
        GapOps.mean_rows[(n * c,)](y, out, h * w, self.multiplier / (h * w), BLOCK=512)
        return out.view(n, c, 1, 1)
