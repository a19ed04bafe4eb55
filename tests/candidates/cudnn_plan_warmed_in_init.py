# Red9 (GPU, informational): cudnn.benchmark at import and a warm-up convolution at the full size in __init__.
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.backends.cudnn.benchmark = True  # allowed at import, undone before the calls


@triton.jit
def gap_kernel(x_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


def gap(x, multiplier):
    x = x.contiguous()
    N, C, H, W = x.shape
    out = torch.empty((N, C, 1, 1), device=x.device, dtype=x.dtype)
    gap_kernel[(N * C,)](x, out, H * W, multiplier / (H * W), BLOCK=256)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier
        if torch.cuda.is_available():
            # a warm-up at the problem's full size while autotuning is on: does cuDNN keep the plan it found once the
            # harness turns benchmark back off?
            conv = self.conv_transpose.cuda()
            with torch.no_grad():
                conv(torch.randn(16, in_channels, 128, 128, device="cuda"))
            self.conv_transpose = conv.cpu()

    def forward(self, x):
        return gap(self.conv_transpose(x), self.multiplier)
