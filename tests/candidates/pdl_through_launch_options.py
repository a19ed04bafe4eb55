# GPU: programmatic dependent launch asked for through a launch-options dict (the static check refuses the
# launch_pdl= keyword, not a dict splatted into the launch). Honest otherwise: the judge must refuse it at run time
# (the compiled kernel's metadata says launch_pdl at the launcher), since overlapping kernels can tell the recorded
# calls from the others.
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
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier
        self.options = {"num_warps": 4, "launch_pdl": True}

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, H, W = y.shape
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=y.dtype)
        gap_kernel[(N * C,)](y, out, H * W, self.multiplier / (H * W), BLOCK=256, **self.options)
        return out
