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
        C, H, W = y.shape[1], y.shape[2], y.shape[3]
        box = torch.ones(C, 1, H, W, device=y.device, dtype=y.dtype) / (H * W)
        pooled = torch.nn.functional.conv2d(y, box, groups=C)
        out = torch.empty_like(pooled)
        n = pooled.numel()
        scale_kernel[(triton.cdiv(n, 256),)](pooled, out, n, self.multiplier, BLOCK=256)
        return out
