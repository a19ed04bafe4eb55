import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def running_sum_kernel(y_ptr, out_ptr, HW, s, BLOCK: tl.constexpr):
    # one program per (n, c): the running sum kept in the output element (torch.zeros), one atomic_add per tile
    row = tl.program_id(0)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        tile = tl.sum(tl.load(y_ptr + row * HW + offs, mask=offs < HW, other=0.0), axis=0)
        tl.atomic_add(out_ptr + row, tile * (s / HW))


class ModelNew(nn.Module):
    """memory-fusion: correct, one launch, no intermediate buffer, but the accumulator lives in global memory (the
    output element, read and written by an atomic every tile): a round trip of a few bytes per output element, far
    under the stage's limit, measured and reported in the verdict and the next prompt rather than refused."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, H, W = y.shape
        out = torch.zeros((N, C, 1, 1), device=y.device, dtype=y.dtype)
        running_sum_kernel[(N * C,)](y, out, H * W, self.multiplier, BLOCK=64)
        return out
