import torch
import torch.nn as nn
import triton
import triton.language as tl


def _zero_out(nargs):
    nargs["out_ptr"].zero_()


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256, "SPLIT": 2}, num_warps=4, pre_hook=_zero_out),
        triton.Config({"BLOCK": 512, "SPLIT": 4}, num_warps=4, pre_hook=_zero_out),
    ],
    key=["HW"],
)
@triton.jit
def split_gap_kernel(y_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr, SPLIT: tl.constexpr):
    row = tl.program_id(0)
    part = tl.program_id(1)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(part * BLOCK, HW, BLOCK * SPLIT):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(y_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, H, W = y.shape
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=torch.float32)
        split_gap_kernel[lambda m: (N * C, m["SPLIT"])](y, out, H * W, self.multiplier / (H * W))
        return out
