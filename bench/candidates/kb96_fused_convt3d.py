"""KernelBench #96 look-alike (ConvTranspose3d -> x scale -> MaxPool3d -> GAP -> clamp) as one fused kernel: the
transposed convolution is computed window by window inside the max-pool and summed for the mean, so its output
(128 x 16 x 31 x 63 x 63 fp32, 1 GB at the file's sizes) is never written. Where the pool's window is a multiple of
the conv's stride, each window element's output index has a fixed remainder modulo the stride, so which kernel taps
reach it is known when the kernel is compiled: of 27 taps x 8 window elements only (1 + 2)^3 = 27 loads per input
channel are generated (stride 2, padding 1, kernel 3), none of them a masked-out tap.

An experiment for issue 21 (torch.compile: the cuDNN transposed conv, 4.55 ms on an H100, then one Triton kernel for
the rest; this answer's arithmetic is ~2.4 GFMA at those sizes). Judge it with
    agent eval bench/candidates/kb96_fused_convt3d.py --problem kb_96_convt3d_mul_maxpool_gap_clamp --stage correctness
(add --device cpu for CPU mode). Written for this project; not a template of the offline proposer (yet).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def convt3d_pool_gap_kernel(x_ptr, w_ptr, b_ptr, part_ptr, scale, CIN, ID, IH, IW, C, PD, PH, PW, TILES,
                            K: tl.constexpr, S: tl.constexpr, PAD: tl.constexpr, PK: tl.constexpr,
                            BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    # program (n, tile): BLOCK_P pooled positions x all channels; per position the max over its PK^3 window of
    # scale * convT(x), summed over the tile's positions into part[n, tile, :]
    n = tl.program_id(0)
    t = tl.program_id(1)
    ps = t * BLOCK_P + tl.arange(0, BLOCK_P)
    pm = ps < PD * PH * PW
    pw = ps % PW
    ph = (ps // PW) % PH
    pd = ps // (PW * PH)
    cs = tl.arange(0, BLOCK_C)
    cm = cs < C
    bias = tl.load(b_ptr + cs, mask=cm, other=0.0)
    best = tl.full([BLOCK_P, BLOCK_C], float("-inf"), tl.float32)
    for a in tl.static_range(PK):
        for b in tl.static_range(PK):
            for e in tl.static_range(PK):
                acc = tl.zeros([BLOCK_P, BLOCK_C], dtype=tl.float32) + bias[None, :]
                for kd in tl.static_range(K):
                    # output index o = pd * PK + a; input i = (o + PAD - kd) / S when it divides
                    if (a + PAD - kd) % S == 0:
                        i_d = pd * (PK // S) + (a + PAD - kd) // S
                        md = (i_d >= 0) & (i_d < ID)
                        for kh in tl.static_range(K):
                            if (b + PAD - kh) % S == 0:
                                i_h = ph * (PK // S) + (b + PAD - kh) // S
                                mh = md & (i_h >= 0) & (i_h < IH)
                                for kw in tl.static_range(K):
                                    if (e + PAD - kw) % S == 0:
                                        i_w = pw * (PK // S) + (e + PAD - kw) // S
                                        m = pm & mh & (i_w >= 0) & (i_w < IW)
                                        off = (i_d * IH + i_h) * IW + i_w
                                        for ic in range(CIN):
                                            xv = tl.load(x_ptr + (n * CIN + ic).to(tl.int64) * ID * IH * IW + off,
                                                         mask=m, other=0.0)
                                            # ConvTranspose3d weight: (Cin, Cout, K, K, K)
                                            wv = tl.load(w_ptr + ((ic * C + cs) * K + kd) * K * K + kh * K + kw,
                                                         mask=cm, other=0.0)
                                            acc += xv[:, None] * wv[None, :]
                best = tl.maximum(best, acc * scale)
    best = tl.where(pm[:, None] & cm[None, :], best, 0.0)
    tl.store(part_ptr + (n * TILES + t) * BLOCK_C + cs, tl.sum(best, axis=0), mask=cm)


@triton.jit
def mean_clamp_kernel(part_ptr, out_ptr, C, TILES, inv_count, lo, hi, BLOCK_T: tl.constexpr,
                      BLOCK_C: tl.constexpr):
    n = tl.program_id(0)
    cs = tl.arange(0, BLOCK_C)
    total = tl.zeros([BLOCK_C], dtype=tl.float32)
    for t0 in range(0, TILES, BLOCK_T):
        ts = t0 + tl.arange(0, BLOCK_T)
        v = tl.load(part_ptr + (n * TILES + ts[:, None]) * BLOCK_C + cs[None, :], mask=ts[:, None] < TILES,
                    other=0.0)
        total += tl.sum(v, axis=0)
    r = tl.minimum(tl.maximum(total * inv_count, lo), hi)
    tl.store(out_ptr + n * C + cs, r, mask=cs < C)


def _triple(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v, v)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, scale, maxpool_kernel_size):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.scale = scale
        self.maxpool_kernel_size = maxpool_kernel_size
        self.clamp_min, self.clamp_max = 0, 1

    def forward(self, x):
        conv = self.conv_transpose
        (k, k2, k3), (s, s2, s3), (p, p2, p3) = _triple(conv.kernel_size), _triple(conv.stride), _triple(conv.padding)
        pk = self.maxpool_kernel_size
        if not (k == k2 == k3 and s == s2 == s3 and p == p2 == p3) or pk % s or any(conv.output_padding) \
                or any(d != 1 for d in conv.dilation) or conv.groups != 1:
            raise ValueError("this kernel takes a cubic kernel, stride and padding, and a pool window that the "
                             "stride divides")
        x = x.contiguous()
        N, CIN, ID, IH, IW = x.shape
        C = conv.out_channels
        OD, OH, OW = ((d - 1) * s - 2 * p + k for d in (ID, IH, IW))
        PD, PH, PW = OD // pk, OH // pk, OW // pk  # MaxPool3d: stride = window, no padding, floor
        BLOCK_P = 64 if x.is_cuda else 1024  # the CPU interpreter pays per operation, not per element
        BLOCK_C = max(16, triton.next_power_of_2(C))
        tiles = triton.cdiv(PD * PH * PW, BLOCK_P)
        part = torch.empty(N * tiles * BLOCK_C, device=x.device, dtype=torch.float32)
        out = torch.empty(N, C, device=x.device, dtype=torch.float32)
        convt3d_pool_gap_kernel[(N, tiles)](
            x, conv.weight.contiguous(), conv.bias, part, float(self.scale), CIN, ID, IH, IW, C, PD, PH, PW, tiles,
            K=k, S=s, PAD=p, PK=pk, BLOCK_P=BLOCK_P, BLOCK_C=BLOCK_C, num_warps=4,
        )
        mean_clamp_kernel[(N,)](part, out, C, tiles, 1.0 / (PD * PH * PW), float(self.clamp_min),
                                float(self.clamp_max), BLOCK_T=64, BLOCK_C=BLOCK_C, num_warps=4)
        return out.view(N, C, 1, 1, 1).to(x.dtype)
