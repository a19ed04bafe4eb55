import torch
import torch.nn as nn
import triton
import triton.language as tl


def _metadata(grid, kernel, args):
    return {"name": f"gap_scale[{args['HW']}]", "bytes": 4 * args["HW"]}


@triton.jit(launch_metadata=_metadata)
def gap_pairs_kernel(y_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = y_ptr + row.to(tl.int64) * HW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in tl.range(0, HW, 2 * BLOCK, flatten=True):
        offs = start + tl.arange(0, BLOCK)
        a = tl.load(base + offs, mask=offs < HW, other=0.0)
        b = tl.load(base + offs + BLOCK, mask=offs + BLOCK < HW, other=0.0)
        pair = tl.join(a, b)  # [BLOCK, 2]
        acc += tl.sum(tl.permute(pair, (1, 0)), axis=0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


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
        out = torch.empty((N, C, 1, 1), device=y.device, dtype=y.dtype)
        gap_pairs_kernel[(N * C,)](y, out, H * W, self.multiplier / (H * W), BLOCK=256)
        return out
