import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

try:
    from triton.language.extra import libdevice
except ImportError:  # older Triton
    from triton.language.extra.cuda import libdevice


@triton.jit
def gap_bias_kernel(x_ptr, bias_ptr, out_ptr, C, HW, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = row % C
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row.to(tl.int64) * HW + offs, mask=offs < HW, other=0.0)
    total = libdevice.fma(tl.sum(acc, axis=0), scale, tl.load(bias_ptr + c))
    tl.store(out_ptr + row, total)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier
        # the bias survives both means unchanged: fold it, scaled, into the epilogue
        self.register_buffer("bias_scaled", (self.conv_transpose.bias.detach() * multiplier).reshape(-1).contiguous(),
                             persistent=False)

    def forward(self, x):
        ct = self.conv_transpose
        y = F.conv_transpose2d(x, ct.weight, None, stride=ct.stride, padding=ct.padding,
                               output_padding=ct.output_padding)
        y = y.contiguous()
        N, C, H, W = y.shape
        out = torch.empty((N, C), device=x.device, dtype=torch.float32)
        gap_bias_kernel[(N * C,)](y, self.bias_scaled, out, C, H * W, self.multiplier / (H * W), BLOCK=512)
        return out.unsqueeze(-1).unsqueeze(-1)
