import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gap_kernel(x_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    """Host overhead: the output buffer and launch arguments are cached per input shape."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = multiplier
        self._plans = {}

    def forward(self, x):
        y = self.conv_transpose(x)
        key = (y.shape, y.device, y.dtype)
        plan = self._plans.get(key)
        if plan is None:
            n, c, h, w = y.shape
            out = torch.empty((n, c, 1, 1), device=y.device, dtype=y.dtype)
            plan = (out, (n * c,), h * w, self.multiplier / (h * w))
            self._plans[key] = plan
        out, grid, hw, scale = plan
        gap_kernel[grid](y, out, hw, scale, BLOCK=1024)
        torch.cuda.synchronize()  # make sure the kernel finished
        return out
