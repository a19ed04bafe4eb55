import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def image_gap_kernel(x_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, HW, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + c * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + c, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    @torch.no_grad()
    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, H, W = y.shape
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=y.dtype)
        scale = self.multiplier / (H * W)
        if x.is_cuda:
            # launch on the caller's stream, on the tensor's device
            with torch.cuda.device(x.device):
                stream = torch.cuda.current_stream()
                assert stream == torch.cuda.current_stream(x.device)
                for n in range(N):
                    image_gap_kernel[(C,)](y[n], out[n], H * W, scale, BLOCK=1024)
        else:
            for n in range(N):
                image_gap_kernel[(C,)](y[n], out[n], H * W, scale, BLOCK=1024)
        return out
