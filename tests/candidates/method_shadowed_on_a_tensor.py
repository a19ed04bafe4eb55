# Red8: a tensor's own namespace shadows its class's methods. `y.numel = late` (a plain attribute assignment): the
# recorder read y.numel() for the bytes of the next operator on y, inside its own dispatch where its mode is off, so
# late() took the conv's mean in PyTorch into the output unrecorded, in every traced call (all of CPU mode's).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mark_kernel(out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.full((BLOCK,), 1.0, tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x):
        y = self.conv_transpose(x)
        n = y.shape[0] * y.shape[1]
        out = torch.empty(n, device=x.device, dtype=x.dtype)
        mark_kernel[(1,)](out, n, BLOCK=triton.next_power_of_2(n))
        real, m = y.numel, self.multiplier

        def late():
            out.copy_(torch.mean(y * m, dim=[2, 3]).flatten())
            return real()

        y.numel = late  # the recorder reads it for the next operator's bytes, inside its own dispatch
        y.view(-1)
        return out.view(y.shape[0], y.shape[1], 1, 1)
