import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(src, dst, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n) * s, mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier


    def forward(self, x):
        y = self.conv_transpose(x)
        parts = [y[i:i + 1].sum(dim=[2, 3], keepdim=True) for i in range(y.shape[0])]
        sums = torch.cat(parts)
        out = torch.empty_like(sums)
        n = sums.numel()
        scale_kernel[(triton.cdiv(n, 256),)](sums, out, n, self.multiplier / (y.shape[2] * y.shape[3]), BLOCK=256)
        return out
