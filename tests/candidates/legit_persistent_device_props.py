import itertools
import warnings
from enum import Enum

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton import cdiv, next_power_of_2


class Mode(Enum):
    PERSISTENT = "persistent"
    ROWS = "rows"


def _clear(nargs):
    nargs["out_ptr"].zero_()


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w, pre_hook=_clear) for b, w in itertools.product((256, 1024), (4,))],
    key=["HW"],
)
@triton.jit(do_not_specialize=["ROWS"])
def persistent_gap(x_ptr, out_ptr, ROWS, HW, scale, BLOCK: tl.constexpr):
    start_pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for row in range(start_pid, ROWS, nprog):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for s in range(0, HW, BLOCK):
            offs = s + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row.to(tl.int64) * HW + offs, mask=offs < HW, other=0.0)
        tl.atomic_add(out_ptr + row, tl.sum(acc, axis=0) * scale, sem="relaxed")


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier,
                 mode: Mode = Mode.PERSISTENT):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier
        self.mode = mode
        if mode is not Mode.PERSISTENT:
            warnings.warn("only the persistent mode is implemented; using it")

    def forward(self, x):
        y = self.conv_transpose(x)
        if not y.is_contiguous():
            y = y.contiguous()
        N, C, H, W = y.shape
        rows = N * C
        out = torch.zeros(rows, device=y.device, dtype=torch.float32)
        grid = (min(rows, 2 * _num_sms(y.device)),)
        persistent_gap[grid](y, out, rows, H * W, self.multiplier / (H * W))
        return out.reshape(N, C, 1, 1)
