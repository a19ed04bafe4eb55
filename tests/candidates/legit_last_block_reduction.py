import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gap_last_block(x, part, count, out, HW, scale, S: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    chunk = tl.cdiv(HW, S)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(split * chunk, split * chunk + chunk, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = (offs < HW) & (offs < split * chunk + chunk)
        acc += tl.load(x + row * HW + offs, mask=m, other=0.0)
    tl.store(part + row * S + split, tl.sum(acc, axis=0))
    ticket = tl.atomic_add(count + row, 1)
    if ticket == S - 1:
        total = tl.sum(tl.load(part + row * S + tl.arange(0, S), volatile=True), axis=0)
        tl.store(out + row, total * scale)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier


    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, H, W = y.shape
        part = torch.empty(N * C * 4, device=y.device, dtype=torch.float32)
        count = torch.zeros(N * C, device=y.device, dtype=torch.int32)
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=y.dtype)
        gap_last_block[(N * C, 4)](y, part, count, out, H * W, self.multiplier / (H * W), S=4, BLOCK=256)
        return out
