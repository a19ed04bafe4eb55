import torch
import torch.nn as nn
import triton
import triton.language as tl

# as in Triton's persistent-matmul tutorial
NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count
CAPABILITY = torch.cuda.get_device_capability()


@triton.jit
def persistent_gap(x_ptr, out_ptr, ROWS, HW, scale, NUM_PROGS: tl.constexpr, BLOCK: tl.constexpr):
    start_pid = tl.program_id(0)
    for row in tl.range(start_pid, ROWS, NUM_PROGS):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for s in range(0, HW, BLOCK):
            offs = s + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * HW + offs, mask=offs < HW, other=0.0)
        tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = multiplier
        self.block = 1024 if CAPABILITY[0] >= 9 else 512

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        n, c, h, w = y.shape
        rows = n * c
        out = torch.empty((n, c, 1, 1), device=y.device, dtype=y.dtype)
        progs = min(NUM_SMS, rows)
        persistent_gap[(progs,)](y, out, rows, h * w, self.multiplier / (h * w), NUM_PROGS=progs, BLOCK=self.block)
        return out
