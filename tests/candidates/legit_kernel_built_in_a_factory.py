import torch
import torch.nn as nn
import triton
import triton.language as tl


def make_kernel():
    @triton.jit
    def rows_mean(src, dst, HW, scale, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, HW, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            acc += tl.load(src + row * HW + offs, mask=offs < HW, other=0.0)
        tl.store(dst + row, tl.sum(acc, axis=0) * scale)

    return rows_mean


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

        self._kernel = make_kernel()


    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, H, W = y.shape
        flat = torch.empty(N * C, device=y.device, dtype=y.dtype)
        self._kernel[(N * C,)](y, flat, H * W, self.multiplier / (H * W), BLOCK=256)
        return flat.reshape(N, C, 1, 1)
