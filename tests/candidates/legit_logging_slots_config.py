import logging

import torch
import torch.nn as nn
import triton
import triton.language as tl

log: logging.Logger = logging.getLogger("gap44.triton")
log.setLevel(logging.WARNING)


class _Cfg:
    __slots__ = ("block", "warps")

    def __init__(self, block: int, warps: int) -> None:
        self.block = block
        self.warps = warps


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
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = multiplier
        self.cfg = _Cfg(256, 4)
        log.info("ModelNew: multiplier=%s, block=%d", multiplier, self.cfg.block)

    def forward(self, x):
        y = self.conv_transpose(x)
        if not y.is_contiguous():
            logging.getLogger(__name__).debug("making the conv output contiguous (%s)", tuple(y.stride()))
            y = y.contiguous()
        N, C, H, W = y.shape
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=y.dtype)
        try:
            gap_kernel[(N * C,)](y, out, H * W, self.multiplier / (H * W), BLOCK=self.cfg.block,
                                 num_warps=self.cfg.warps)
        except Exception:
            log.exception("gap kernel failed for shape %s", tuple(y.shape))
            raise
        return out
