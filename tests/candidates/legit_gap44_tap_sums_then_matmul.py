import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tap_sums_kernel(x_ptr, r_ptr, H, W, Hout, Wout, sh, sw, ph, pw,
                    KH: tl.constexpr, KW: tl.constexpr, KHP: tl.constexpr, KWP: tl.constexpr,
                    BH: tl.constexpr, BW: tl.constexpr):
    # One program per (n, ci) input plane: R[kh, kw] sums x over the input positions whose output position under
    # tap (kh, kw) of the transposed convolution lands inside the output. x is read once.
    plane = tl.program_id(0)
    base = plane.to(tl.int64) * H * W
    kh = tl.arange(0, KHP)
    kw = tl.arange(0, KWP)
    acc = tl.zeros([KHP, KWP], dtype=tl.float32)
    for w0 in range(0, W, BW):
        iw = w0 + tl.arange(0, BW)
        cols = tl.zeros([KHP, BW], dtype=tl.float32)
        for h0 in range(0, H, BH):
            ih = h0 + tl.arange(0, BH)
            m = (ih[:, None] < H) & (iw[None, :] < W)
            x = tl.load(x_ptr + base + ih[:, None] * W + iw[None, :], mask=m, other=0.0)
            oh = ih[None, :] * sh - ph + kh[:, None]
            in_h = ((oh >= 0) & (oh < Hout) & (kh[:, None] < KH)).to(tl.float32)
            cols += tl.sum(in_h[:, :, None] * x[None, :, :], axis=1)
        ow = iw[None, :] * sw - pw + kw[:, None]
        in_w = ((ow >= 0) & (ow < Wout) & (kw[:, None] < KW) & (iw[None, :] < W)).to(tl.float32)
        acc += tl.sum(cols[:, None, :] * in_w[None, :, :], axis=2)
    offs = plane * KH * KW + kh[:, None] * KW + kw[None, :]
    tl.store(r_ptr + offs, acc, mask=(kh[:, None] < KH) & (kw[None, :] < KW))


class ModelNew(nn.Module):
    """Algebraic: the GAP of ConvTranspose2d(x) is bias + (per-tap sums of x) @ (the weight as a (Cin*K*K, Cout)
    matrix) / (Hout*Wout). The sums in Triton (x read once); the small (N x Cin*K*K) @ (Cin*K*K x Cout) matmul, the
    bias and the multiplier in PyTorch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x):
        x = x.contiguous()
        conv = self.conv_transpose
        N, Cin, H, W = x.shape
        Cout, KH, KW = conv.weight.shape[1], conv.weight.shape[2], conv.weight.shape[3]
        (sh, sw), (ph, pw), (oph, opw) = conv.stride, conv.padding, conv.output_padding
        Hout = (H - 1) * sh - 2 * ph + KH + oph
        Wout = (W - 1) * sw - 2 * pw + KW + opw
        sums = torch.empty((N, Cin * KH * KW), device=x.device, dtype=torch.float32)
        tap_sums_kernel[(N * Cin,)](x, sums, H, W, Hout, Wout, sh, sw, ph, pw, KH=KH, KW=KW,
                                    KHP=triton.next_power_of_2(KH), KWP=triton.next_power_of_2(KW),
                                    BH=min(8, triton.next_power_of_2(H)), BW=min(64, triton.next_power_of_2(W)))
        weight = conv.weight.permute(0, 2, 3, 1).reshape(Cin * KH * KW, Cout)  # (ci, kh, kw) rows, as the sums
        gap = torch.mm(sums, weight) / (Hout * Wout) + conv.bias
        return (gap * self.multiplier).view(N, Cout, 1, 1)
