import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def convt_gap_kernel(
    x_ptr, w_ptr, b_ptr, part_ptr, ticket_ptr, out_ptr, s0,
    CIN: tl.constexpr, COUT: tl.constexpr, H: tl.constexpr, W: tl.constexpr, HOUT: tl.constexpr,
    WOUT: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DH: tl.constexpr,
    DW: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, KHP: tl.constexpr, KWP: tl.constexpr,
    ROW_LO: tl.constexpr, ROW_HI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr, BLOCK_CO: tl.constexpr,
    BLOCK_CI: tl.constexpr, HAS_BIAS: tl.constexpr,
):
    # Tap (kh, kw) of the transposed convolution sends x[ih, iw] to (ih*SH - PH + kh*DH, iw*SW - PW + kw*DW), so
    # the spatial mean of its output is bias + sum_{ci, kh, kw} W[ci, co, kh, kw] * S[ci, kh, kw] / (HOUT * WOUT),
    # where S[kh, kw] sums x over the rows whose output row lands in [0, HOUT) (an interval per kh) and the
    # columns likewise. Rows in [ROW_LO, ROW_HI) land for every kh: they are summed once, one add per element, and
    # the few border rows outside it are taken back per kh. Exact for any stride, padding, dilation and
    # output_padding; x is read once and the conv output never exists. One program per (n, ci) input plane.
    plane = tl.program_id(0)
    n = plane // CIN
    ci = plane % CIN
    base = plane.to(tl.int64) * (H * W)
    kh = tl.arange(0, KHP)
    kw = tl.arange(0, KWP)
    sums = tl.zeros([KHP, KWP], dtype=tl.float32)
    for w0 in range(0, W, BW):
        iw = w0 + tl.arange(0, BW)
        acc = tl.zeros([BH, BW], dtype=tl.float32)
        for h0 in range(0, H, BH):
            ih = h0 + tl.arange(0, BH)
            m = (ih[:, None] < H) & (iw[None, :] < W)
            acc += tl.load(x_ptr + base + ih[:, None] * W + iw[None, :], mask=m, other=0.0).to(tl.float32)
        cols = tl.sum(acc, axis=0)[None, :] + tl.zeros([KHP, BW], dtype=tl.float32)  # [KHP, BW]
        for r in range(0, ROW_LO + (H - ROW_HI)):  # border rows: [0, ROW_LO) and [ROW_HI, H)
            ih = r + (ROW_HI - ROW_LO) * (r >= ROW_LO)
            xr = tl.load(x_ptr + base + ih * W + iw, mask=iw < W, other=0.0).to(tl.float32)
            oh = ih * SH - PH + kh * DH
            cols -= ((oh < 0) | (oh >= HOUT)).to(tl.float32)[:, None] * xr[None, :]  # the taps it misses
        ow = iw[None, :] * SW - PW + kw[:, None] * DW
        in_w = ((ow >= 0) & (ow < WOUT) & (iw[None, :] < W)).to(tl.float32)  # [KWP, BW]
        sums += tl.sum(cols[:, None, :] * in_w[None, :, :], axis=2)
    # This plane's share of every output channel: sum over taps of W[ci, co, kh, kw] * S[kh, kw].
    tap = kh[:, None] * KW + kw[None, :]
    tap_m = (kh[:, None] < KH) & (kw[None, :] < KW)
    for co0 in range(0, COUT, BLOCK_CO):
        co = co0 + tl.arange(0, BLOCK_CO)
        co_m = co < COUT
        w = tl.load(w_ptr + (ci * COUT + co[:, None, None]) * (KH * KW) + tap[None, :, :],
                    mask=co_m[:, None, None] & tap_m[None, :, :], other=0.0).to(tl.float32)
        share = tl.sum(tl.sum(w * sums[None, :, :], axis=2), axis=1)
        tl.store(part_ptr + plane.to(tl.int64) * COUT + co, share, mask=co_m)
    # The last of batch row n's CIN programs to finish adds the shares up, in a fixed order (the result does not
    # depend on which program came last), and puts the ticket back to zero for the next call. The barrier orders
    # every thread's stores before the ticket's release; the acquiring program reads the shares from L2 (.cg).
    tl.debug_barrier()
    ticket = tl.atomic_add(ticket_ptr + n, 1, sem="acq_rel")
    if ticket == CIN - 1:
        for co0 in range(0, COUT, BLOCK_CO):
            co = co0 + tl.arange(0, BLOCK_CO)
            co_m = co < COUT
            r = tl.zeros([BLOCK_CO], dtype=tl.float32)
            for c0 in range(0, CIN, BLOCK_CI):
                c = c0 + tl.arange(0, BLOCK_CI)
                p = tl.load(part_ptr + (n * CIN + c[:, None]).to(tl.int64) * COUT + co[None, :],
                            mask=(c[:, None] < CIN) & co_m[None, :], other=0.0, cache_modifier=".cg")
                r += tl.sum(p, axis=0)
            r = r * (1.0 / (HOUT * WOUT))
            if HAS_BIAS:
                r += tl.load(b_ptr + co, mask=co_m, other=0.0).to(tl.float32)
            r = r * s0
            tl.store(out_ptr + n * COUT + co, r, mask=co_m)
        tl.atomic_xchg(ticket_ptr + n, 0)


def _rows_for_every_tap(size, out_size, stride, pad, dil, taps):
    """[lo, hi): the input rows whose output row lands inside [0, out_size) for every tap."""
    lo = max(0, max(-(-(pad - t * dil) // stride) for t in range(taps)))
    hi = min(size, min((out_size - 1 + pad - t * dil) // stride + 1 for t in range(taps)))
    return lo, max(lo, hi)


def convt_gap_plan(x, conv):
    """What one input shape needs: the grid, the kernel's constants (every shape and conv parameter is one), the
    launch options, and the scratch (each call overwrites every share; the tickets go back to zero)."""
    N, Cin, H, W = x.shape
    Cout, KH, KW = conv.weight.shape[1], conv.weight.shape[2], conv.weight.shape[3]
    (sh, sw), (ph, pw), (dh, dw), (oph, opw) = conv.stride, conv.padding, conv.dilation, conv.output_padding
    Hout = (H - 1) * sh - 2 * ph + dh * (KH - 1) + oph + 1
    Wout = (W - 1) * sw - 2 * pw + dw * (KW - 1) + opw + 1
    lo, hi = _rows_for_every_tap(H, Hout, sh, ph, dh, KH)
    consts = dict(CIN=Cin, COUT=Cout, H=H, W=W, HOUT=Hout, WOUT=Wout, SH=sh, SW=sw, PH=ph, PW=pw, DH=dh, DW=dw,
                  KH=KH, KW=KW, KHP=triton.next_power_of_2(KH), KWP=triton.next_power_of_2(KW), ROW_LO=lo, ROW_HI=hi,
                  BH=min(8, triton.next_power_of_2(H)), BW=min(128, triton.next_power_of_2(W)),
                  BLOCK_CO=min(128, triton.next_power_of_2(Cout)), BLOCK_CI=min(32, triton.next_power_of_2(Cin)),
                  HAS_BIAS=conv.bias is not None)
    part = torch.empty(N * Cin * Cout, device=x.device, dtype=torch.float32)
    tickets = torch.zeros(N, device=x.device, dtype=torch.int32)
    return [(N * Cin, 1, 1), consts, dict(num_warps=4, num_stages=3), part, tickets, None]


def convt_gap(x, conv, plans, s0):
    """Spatial mean of ConvTranspose2d(x) with the epilogue, from window sums of x."""
    x = x.contiguous()
    weight = conv.weight.contiguous()  # [Cin, Cout, KH, KW] (groups == 1)
    bias = conv.bias if conv.bias is not None else weight
    # a compiled kernel assumes its pointers' 16-byte alignment: part of what it was compiled for
    key = (x.shape, x.dtype, x.device, x.data_ptr() % 16, weight.data_ptr() % 16, bias.data_ptr() % 16)
    plan = plans.get(key)
    if plan is None:
        if len(plans) >= 8:
            plans.clear()
        plan = plans[key] = convt_gap_plan(x, conv)
    grid, consts, options, part, tickets, launch = plan
    N, Cout = x.shape[0], consts["COUT"]
    out = torch.empty(N, Cout, device=x.device, dtype=torch.float32)
    args = (x, weight, bias, part, tickets, out, float(s0))
    if launch is not None:
        launch(*args, *consts.values())
    else:
        compiled = convt_gap_kernel[grid](*args, **consts, **options)
        # Triton returns what it compiled (None under TRITON_INTERPRET=1): later calls of this key launch it
        # directly, without the JIT's per-call binding of 30 arguments (about half of the call's host time)
        if compiled is not None and hasattr(compiled, "__getitem__"):
            plan[5] = compiled[grid]
    out = out.view(N, Cout, 1, 1)
    return out if x.dtype == torch.float32 else out.to(x.dtype)


class ModelNew(nn.Module):
    """ConvTranspose2d -> epilogue -> global average pool, in closed form and one launch: window sums of the input, contracted with the weight; the conv output is never materialised."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding)
        self.multiplier = multiplier

    _plans = None  # per input shape, dtype, device and alignment: see convt_gap_plan

    def plans(self):
        """This module's launch plans (one stream at a time per module: the scratch is shared by its calls)."""
        if self._plans is None:
            self._plans = {}
        return self._plans

    def forward(self, x):
        return convt_gap(x, self.conv_transpose, self.plans(), self.multiplier)


