"""ModelNew: the Triton kernels and wrapper torch.compile (Inductor, torch 2.11.0+cu130, triton 3.6.0, NVIDIA H100 80GB HBM3) generated for the problem's Model, made self-contained; captured at 2 size sets (static shapes): forward runs the code captured for its inputs' shapes."""


import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def triton_poi_fused_convolution_0_s0(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK: tl.constexpr, XBLOCK: tl.constexpr):
    ynumel = 1024
    xnumel = 16384
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = tl.full([YBLOCK], True, tl.int1)[:, None]
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = tl.full([XBLOCK], True, tl.int1)[None, :]
    x2 = xindex
    y3 = yindex
    y0 = yindex % 64
    y1 = yindex // 64
    tmp0 = tl.load(in_ptr0 + (x2 + 16384 * y3), None, eviction_policy='evict_last')
    tl.store(out_ptr0 + (y0 + 64 * x2 + 1048576 * y1), tmp0, None)


def launch_triton_poi_fused_convolution_0_s0(in_ptr0, out_ptr0, ynumel, xnumel):
    triton_poi_fused_convolution_0_s0[(-(xnumel // -32), -(ynumel // -32), 1,)](in_ptr0, out_ptr0, ynumel, xnumel, XBLOCK=32, YBLOCK=32, num_warps=4, num_stages=1)


@triton.jit
def triton_poi_fused_convolution_1_s0(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK: tl.constexpr, XBLOCK: tl.constexpr):
    ynumel = 8192
    xnumel = 9
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = tl.full([YBLOCK], True, tl.int1)[:, None]
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y3 = yindex
    y0 = yindex % 128
    y1 = yindex // 128
    tmp0 = tl.load(in_ptr0 + (x2 + 9 * y3), xmask, eviction_policy='evict_last')
    tl.store(out_ptr0 + (y0 + 128 * x2 + 1152 * y1), tmp0, xmask)


def launch_triton_poi_fused_convolution_1_s0(in_ptr0, out_ptr0, ynumel, xnumel):
    triton_poi_fused_convolution_1_s0[(-(xnumel // -16), -(ynumel // -64), 1,)](in_ptr0, out_ptr0, ynumel, xnumel, XBLOCK=16, YBLOCK=64, num_warps=4, num_stages=1)


@triton.jit
def triton_red_fused_convolution_mean_mul_2_s0(in_ptr0, in_ptr1, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xnumel = 131072
    r0_numel = 1024
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = xindex % 128
    x1 = xindex // 128
    tmp1 = tl.load(in_ptr1 + x0, None, eviction_policy='evict_last')
    _tmp6 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    x3 = xindex
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_2 = r0_index
        tmp0 = tl.load(in_ptr0 + (x0 + 128 * r0_2 + 131072 * x1), r0_mask, eviction_policy='evict_first', other=0.0)
        tmp2 = tmp0 + tmp1
        tmp3 = tl.full([1, 1], 0.5, tl.float32)
        tmp4 = tmp2 * tmp3
        tmp5 = tl.broadcast_to(tmp4, [XBLOCK, R0_BLOCK])
        tmp7 = _tmp6 + tmp5
        _tmp6 = tl.where(r0_mask, tmp7, _tmp6)
    tmp6 = tl.sum(_tmp6, 1)[:, None]
    tl.store(out_ptr0 + x3, tmp6, None)


def launch_triton_red_fused_convolution_mean_mul_2_s0(in_ptr0, in_ptr1, out_ptr0, xnumel, r0_numel):
    triton_red_fused_convolution_mean_mul_2_s0[(-(xnumel // -64), 1, 1,)](in_ptr0, in_ptr1, out_ptr0, xnumel, r0_numel, XBLOCK=64, R0_BLOCK=8, num_warps=4, num_stages=1)


@triton.jit
def triton_per_fused_convolution_mean_mul_3_s0(in_out_ptr0, in_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr):
    xnumel = 2048
    r0_numel = 64
    R0_BLOCK: tl.constexpr = 64
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    roffset = r0_offset
    rindex = r0_index
    r0_2 = r0_index
    x0 = xindex % 128
    x1 = xindex // 128
    x3 = xindex
    tmp0 = tl.load(in_ptr0 + (x0 + 128 * r0_2 + 8192 * x1), xmask, other=0.0)
    tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
    tmp3 = tl.where(xmask, tmp1, 0)
    tmp4 = tl.sum(tmp3, 1)[:, None].to(tl.float32)
    tmp5 = tl.full([1, 1], 65536.0, tl.float32)
    tmp6 = tmp4 / tmp5
    tmp7 = tl.full([1, 1], 1.0, tl.float32)
    tmp8 = tmp6 / tmp7
    tl.debug_barrier()
    tl.store(in_out_ptr0 + x3, tmp8, xmask)


def launch_triton_per_fused_convolution_mean_mul_3_s0(in_out_ptr0, in_ptr0, xnumel, r0_numel):
    triton_per_fused_convolution_mean_mul_3_s0[(-(xnumel // -32), 1, 1,)](in_out_ptr0, in_ptr0, xnumel, r0_numel, XBLOCK=32, num_warps=8, num_stages=1)


def call_s0(arg0_1, arg1_1, arg2_1):
    device = arg0_1.device
    buf0 = torch.empty_strided((16, 64, 128, 128), (1048576, 1, 8192, 64), dtype=torch.float32, device=device)
    launch_triton_poi_fused_convolution_0_s0(arg2_1, buf0, 1024, 16384)
    del arg2_1
    buf1 = torch.empty_strided((64, 128, 3, 3), (1152, 1, 384, 128), dtype=torch.float32, device=device)
    launch_triton_poi_fused_convolution_1_s0(arg0_1, buf1, 8192, 9)
    del arg0_1
    buf2 = torch.convolution(buf0, buf1, stride=(2, 2), padding=(1, 1), dilation=(1, 1), transposed=True, output_padding=(1, 1), groups=1, bias=None)
    del buf0
    del buf1
    buf3 = torch.empty_strided((16, 128, 1, 1, 64), (8192, 1, 131072, 131072, 128), dtype=torch.float32, device=device)
    launch_triton_red_fused_convolution_mean_mul_2_s0(buf2, arg1_1, buf3, 131072, 1024)
    del arg1_1
    del buf2
    buf4 = torch.empty_strided((16, 128, 1, 1), (128, 1, 2048, 2048), dtype=torch.float32, device=device)
    buf5 = torch.as_strided(buf4, (16, 128, 1, 1), (128, 1, 1, 1))
    del buf4
    launch_triton_per_fused_convolution_mean_mul_3_s0(buf5, buf3, 2048, 64)
    del buf3
    return buf5


@triton.jit
def triton_poi_fused_convolution_0_s1(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK: tl.constexpr, XBLOCK: tl.constexpr):
    ynumel = 95
    xnumel = 1305
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = yindex < ynumel
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y3 = yindex
    y0 = yindex % 19
    y1 = yindex // 19
    tmp0 = tl.load(in_ptr0 + (x2 + 1305 * y3), xmask & ymask, eviction_policy='evict_last')
    tl.store(out_ptr0 + (y0 + 19 * x2 + 24795 * y1), tmp0, xmask & ymask)


def launch_triton_poi_fused_convolution_0_s1(in_ptr0, out_ptr0, ynumel, xnumel):
    triton_poi_fused_convolution_0_s1[(-(xnumel // -32), -(ynumel // -32), 1,)](in_ptr0, out_ptr0, ynumel, xnumel, XBLOCK=32, YBLOCK=32, num_warps=4, num_stages=1)


@triton.jit
def triton_poi_fused_convolution_1_s1(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK: tl.constexpr, XBLOCK: tl.constexpr):
    ynumel = 703
    xnumel = 9
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = yindex < ynumel
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y3 = yindex
    y0 = yindex % 37
    y1 = yindex // 37
    tmp0 = tl.load(in_ptr0 + (x2 + 9 * y3), xmask & ymask, eviction_policy='evict_last')
    tl.store(out_ptr0 + (y0 + 37 * x2 + 333 * y1), tmp0, xmask & ymask)


def launch_triton_poi_fused_convolution_1_s1(in_ptr0, out_ptr0, ynumel, xnumel):
    triton_poi_fused_convolution_1_s1[(-(xnumel // -16), -(ynumel // -64), 1,)](in_ptr0, out_ptr0, ynumel, xnumel, XBLOCK=16, YBLOCK=64, num_warps=4, num_stages=1)


@triton.jit
def triton_red_fused_convolution_mean_mul_2_s1(in_ptr0, in_ptr1, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xnumel = 7585
    r0_numel = 128
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x1 = xindex // 37 % 41
    x0 = xindex % 37
    x2 = xindex // 1517
    _tmp11 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    x4 = xindex
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_3 = r0_index
        tmp0 = r0_3 + 128 * x1
        tmp1 = tl.full([1, 1], 5220, tl.int32)
        tmp2 = tmp0 < tmp1
        tmp3 = tl.load(in_ptr0 + (x0 + 37 * ((r0_3 + 128 * x1) % 5220) + 193140 * x2), r0_mask & tmp2 & xmask, eviction_policy='evict_first', other=0.0)
        tmp4 = tl.load(in_ptr1 + tl.broadcast_to(x0, [XBLOCK, R0_BLOCK]), r0_mask & tmp2 & xmask, eviction_policy='evict_last', other=0.0)
        tmp5 = tmp3 + tmp4
        tmp6 = tl.full([1, 1], 0.5, tl.float32)
        tmp7 = tmp5 * tmp6
        tmp8 = tl.full(tmp7.shape, 0, tmp7.dtype)
        tmp9 = tl.where(tmp2, tmp7, tmp8)
        tmp10 = tl.broadcast_to(tmp9, [XBLOCK, R0_BLOCK])
        tmp12 = _tmp11 + tmp10
        _tmp11 = tl.where(r0_mask & xmask, tmp12, _tmp11)
    tmp11 = tl.sum(_tmp11, 1)[:, None]
    tl.store(out_ptr0 + x4, tmp11, xmask)


def launch_triton_red_fused_convolution_mean_mul_2_s1(in_ptr0, in_ptr1, out_ptr0, xnumel, r0_numel):
    triton_red_fused_convolution_mean_mul_2_s1[(-(xnumel // -16), 1, 1,)](in_ptr0, in_ptr1, out_ptr0, xnumel, r0_numel, XBLOCK=16, R0_BLOCK=32, num_warps=4, num_stages=1)


@triton.jit
def triton_per_fused_convolution_mean_mul_3_s1(in_out_ptr0, in_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr):
    xnumel = 185
    r0_numel = 41
    R0_BLOCK: tl.constexpr = 64
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = r0_index < r0_numel
    roffset = r0_offset
    rindex = r0_index
    r0_2 = r0_index
    x0 = xindex % 37
    x1 = xindex // 37
    x3 = xindex
    tmp0 = tl.load(in_ptr0 + (x0 + 37 * r0_2 + 1517 * x1), r0_mask & xmask, other=0.0)
    tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
    tmp3 = tl.where(r0_mask & xmask, tmp1, 0)
    tmp4 = tl.sum(tmp3, 1)[:, None].to(tl.float32)
    tmp5 = tl.full([1, 1], 5220.0, tl.float32)
    tmp6 = tmp4 / tmp5
    tmp7 = tl.full([1, 1], 1.0, tl.float32)
    tmp8 = tmp6 / tmp7
    tl.debug_barrier()
    tl.store(in_out_ptr0 + x3, tmp8, xmask)


def launch_triton_per_fused_convolution_mean_mul_3_s1(in_out_ptr0, in_ptr0, xnumel, r0_numel):
    triton_per_fused_convolution_mean_mul_3_s1[(-(xnumel // -8), 1, 1,)](in_out_ptr0, in_ptr0, xnumel, r0_numel, XBLOCK=8, num_warps=4, num_stages=1)


def call_s1(arg0_1, arg1_1, arg2_1):
    device = arg0_1.device
    buf0 = torch.empty_strided((5, 19, 45, 29), (24795, 1, 551, 19), dtype=torch.float32, device=device)
    launch_triton_poi_fused_convolution_0_s1(arg2_1, buf0, 95, 1305)
    del arg2_1
    buf1 = torch.empty_strided((19, 37, 3, 3), (333, 1, 111, 37), dtype=torch.float32, device=device)
    launch_triton_poi_fused_convolution_1_s1(arg0_1, buf1, 703, 9)
    del arg0_1
    buf2 = torch.convolution(buf0, buf1, stride=(2, 2), padding=(1, 1), dilation=(1, 1), transposed=True, output_padding=(1, 1), groups=1, bias=None)
    del buf0
    del buf1
    buf3 = torch.empty_strided((5, 37, 1, 1, 41), (1517, 1, 7585, 7585, 37), dtype=torch.float32, device=device)
    launch_triton_red_fused_convolution_mean_mul_2_s1(buf2, arg1_1, buf3, 7585, 128)
    del arg1_1
    del buf2
    buf4 = torch.empty_strided((5, 37, 1, 1), (37, 1, 185, 185), dtype=torch.float32, device=device)
    buf5 = torch.as_strided(buf4, (5, 37, 1, 1), (37, 1, 1, 1))
    del buf4
    launch_triton_per_fused_convolution_mean_mul_3_s1(buf5, buf3, 185, 41)
    del buf3
    return buf5


CAPTURED = {
    ((64, 128, 3, 3), (128,), (16, 64, 128, 128), (1048576, 16384, 128, 1)): call_s0,
    ((19, 37, 3, 3), (37,), (5, 19, 45, 29), (24795, 1305, 29, 1)): call_s1,
}
CAPTURED_FOR = 'x (16, 64, 128, 128) | x (5, 19, 45, 29)'


class ModelNew(nn.Module):

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding)
        self.multiplier = multiplier

    def forward(self, x):
        arg0_1 = self.conv_transpose.weight
        arg1_1 = self.conv_transpose.bias
        arg2_1 = x
        call = CAPTURED.get((arg0_1.shape, arg1_1.shape, arg2_1.shape, arg2_1.stride()))
        if call is None:
            raise ValueError('the Inductor start was captured by torch.compile at these sizes only: ' + CAPTURED_FOR + '; this call has ' + 'x ' + str(tuple(arg2_1.shape)))
        return call(arg0_1, arg1_1, arg2_1)
