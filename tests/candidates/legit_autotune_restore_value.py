import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_HW": 128, "BLOCK_C": 8}, num_warps=4, num_stages=2),
             triton.Config({"BLOCK_HW": 512, "BLOCK_C": 4}, num_warps=8, num_stages=3)],
    key=["C", "HW"],
    restore_value=["out_ptr"],
)
@triton.jit
def gap_accumulate(x_ptr, out_ptr, C, HW, scale, BLOCK_HW: tl.constexpr, BLOCK_C: tl.constexpr):
    # out_ptr holds the bias term on entry; the kernel adds the scaled mean to it
    n = tl.program_id(0)
    cb = tl.program_id(1)
    cs = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cs < C
    acc = tl.zeros((BLOCK_C, BLOCK_HW), dtype=tl.float32)
    for start in range(0, HW, BLOCK_HW):
        hw = start + tl.arange(0, BLOCK_HW)
        ptrs = x_ptr + (n * C + cs[:, None]).to(tl.int64) * HW + hw[None, :]
        acc += tl.load(ptrs, mask=cmask[:, None] & (hw[None, :] < HW), other=0.0)
    res = tl.sum(acc, axis=1) * scale
    prev = tl.load(out_ptr + n * C + cs, mask=cmask, other=0.0)
    tl.store(out_ptr + n * C + cs, prev + res, mask=cmask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x):
        w, b = self.conv_transpose.weight, self.conv_transpose.bias
        ct = self.conv_transpose
        y = torch.nn.functional.conv_transpose2d(x, w, None, ct.stride, ct.padding, ct.output_padding)
        y = y.contiguous()
        N, C, H, W = y.shape
        out = (b * self.multiplier).repeat(N).contiguous()
        grid = lambda META: (N, triton.cdiv(C, META["BLOCK_C"]))
        gap_accumulate[grid](y, out, C, H * W, self.multiplier / (H * W))
        return out.reshape(N, C, 1, 1)
