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
        N, C, H, W = y.shape
        ones = torch.full((H * W, 1), 1.0 / (H * W), device=y.device, dtype=y.dtype)
        pooled = torch.matmul(y.reshape(N * C, H * W), ones).reshape(N, C, 1, 1)
        out = torch.empty_like(pooled)
        scale_kernel[(triton.cdiv(N * C, 256),)](pooled, out, N * C, self.multiplier, BLOCK=256)
        return out
