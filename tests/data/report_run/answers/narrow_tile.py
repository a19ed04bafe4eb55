import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gap_all_rows(x_ptr, out_ptr, scale, R, HW, BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr):
    rows = tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_HW)
    acc = tl.zeros((BLOCK_R,), dtype=tl.float32)
    for start in range(0, HW, BLOCK_HW):
        mask = (rows[:, None] < R) & (start + cols[None, :] < HW)
        x = tl.load(x_ptr + rows[:, None] * HW + start + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(x, axis=1)
    tl.store(out_ptr + rows, acc * scale, mask=rows < R)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = multiplier

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        n, c, h, w = y.shape
        out = torch.empty((n, c, 1, 1), device=y.device, dtype=y.dtype)
        block_r = triton.next_power_of_2(n * c)
        block_hw = 256  # a narrower tile: four loop steps at the timed size
        gap_all_rows[(1,)](y, out, self.multiplier / (h * w), n * c, h * w, BLOCK_R=block_r, BLOCK_HW=block_hw)
        return out
