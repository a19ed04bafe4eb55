import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_maxpool_gap_clamp_kernel(
    y_ptr, out_ptr,
    D, H, W, PD, PH, PW,
    scale, lo, hi,
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)  # one (n, c) plane
    plane = y_ptr + pid.to(tl.int64) * D * H * W
    P = PD * PH * PW
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, P, BLOCK):
        p = start + tl.arange(0, BLOCK)
        valid = p < P
        pd = p // (PH * PW)
        ph = (p // PW) % PH
        pw = p % PW
        m = tl.full((BLOCK,), float("-inf"), tl.float32)
        for k in tl.static_range(8):
            dz = k // 4
            dy = (k // 2) % 2
            dx = k % 2
            idx = (2 * pd + dz) * H * W + (2 * ph + dy) * W + (2 * pw + dx)
            v = tl.load(plane + idx, mask=valid, other=float("-inf"))
            m = tl.maximum(m, v * scale)
        total += tl.where(valid, m, 0.0)
    mean = tl.sum(total, axis=0) / P
    tl.store(out_ptr + pid, tl.clamp(mean, lo, hi))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, scale, maxpool_kernel_size):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        if maxpool_kernel_size != 2:
            raise ValueError("this kernel is written for a 2x2x2 max-pool")
        self.scale = 1.0
        # scale > 0 commutes with the max: fold it into the transposed conv once
        self.conv_transpose.weight.data.mul_(scale)
        self.conv_transpose.bias.data.mul_(scale)
        self.clamp_min, self.clamp_max = 0.0, 1.0

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, D, H, W = y.shape
        PD, PH, PW = D // 2, H // 2, W // 2
        out = torch.empty((N, C, 1, 1, 1), device=y.device, dtype=y.dtype)
        scale_maxpool_gap_clamp_kernel[(N * C,)](
            y, out, D, H, W, PD, PH, PW, self.scale, self.clamp_min, self.clamp_max, BLOCK=256,
        )
        return out
