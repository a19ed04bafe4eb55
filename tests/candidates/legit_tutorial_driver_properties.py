import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.runtime import driver

DEVICE = driver.active.get_active_torch_device()
properties = driver.active.utils.get_device_properties(DEVICE.index)
NUM_SM = properties["multiprocessor_count"]
target = triton.runtime.driver.active.get_current_target()
IS_HOPPER = target.backend == "cuda" and target.arch >= 90


@triton.jit
def persistent_gap_kernel(x_ptr, out_ptr, ROWS, HW, scale, BLOCK: tl.constexpr, NUM_PROGS: tl.constexpr):
    start = tl.program_id(0)
    for row in tl.range(start, ROWS, NUM_PROGS):
        base = x_ptr + row.to(tl.int64) * HW
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for k in range(0, HW, BLOCK):
            offs = k + tl.arange(0, BLOCK)
            acc += tl.load(base + offs, mask=offs < HW, other=0.0)
        tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = multiplier
        self.num_warps = 8 if IS_HOPPER else 4

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, H, W = y.shape
        rows = N * C
        out = torch.empty((N, C, 1, 1), device=DEVICE, dtype=y.dtype)
        progs = min(rows, NUM_SM * 4)
        persistent_gap_kernel[(progs,)](y, out, rows, H * W, self.multiplier / (H * W), BLOCK=256,
                                        NUM_PROGS=progs, num_warps=self.num_warps)
        return out
