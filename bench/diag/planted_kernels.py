"""Kernels with a known bottleneck, to record small ncu reports that the diagnosis tests read on the CPU.

    python bench/diag/planted_kernels.py NAME            run one (under ncu)
    bash bench/diag/record_planted.sh                     record them all into $OUT (ncu, a GPU)

strided  every thread loads x[8 i]: 4 of each 32-byte sector used (an uncoalesced load that is all of the traffic)
tail     a compute-bound grid of one full wave and 20 programs more (on an H100: 132 SMs x 16 programs, + 20)
spill    one warp holding a 64 x 256 fp32 tile live across a reduction: 512 values per thread, past 255 registers
conflict every thread of a warp stores and loads shared memory at tid * 128 bytes: all 32 in one bank (PTX, loaded
         by the driver: Triton swizzles its own shared layouts; PTX needs no build step)
conflict_free  the same at tid * 4 bytes: no conflict (the no-false-alarm twin)
healthy  a plain row sum over contiguous 16 K-element rows, 8192 of them: memory-bound at DRAM peak, nothing to fix
"""

from __future__ import annotations

import ctypes
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def strided_kernel(x_ptr, out_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * STRIDE, mask=mask, other=0.0) * 2.0, mask=mask)


@triton.jit
def tail_kernel(x_ptr, out_ptr, steps, BLOCK: tl.constexpr):
    # arithmetic only, the same for every program: a partial last wave leaves most SMs idle for a whole program
    row = tl.program_id(0)
    v = tl.load(x_ptr + row * BLOCK + tl.arange(0, BLOCK))
    for _ in range(steps):
        v = v * 1.0001 + 0.5
    tl.store(out_ptr + row, tl.sum(v, axis=0))


@triton.jit
def healthy_kernel(x_ptr, out_ptr, COLS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, COLS, BLOCK):
        acc += tl.load(x_ptr + row.to(tl.int64) * COLS + c + tl.arange(0, BLOCK))
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def spill_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, COLS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + rows[:, None] * COLS + tl.arange(0, COLS)[None, :])
    v = v / (tl.sum(v * v, axis=0)[None, :] + 1.0)  # every element stays live until the column sums exist
    tl.store(out_ptr + rows, tl.sum(v, axis=1))


SHARED_PTX = """
.version 8.0
.target sm_90
.address_size 64

.visible .entry NAME(.param .u64 out, .param .u32 iters)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<4>;
    .shared .align 16 .b8 tile[32768];

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [iters];
    mov.u32 %r2, %tid.x;
    shl.b32 %r3, %r2, SHIFT;
    mov.u32 %r4, tile;
    add.u32 %r5, %r4, %r3;
    cvt.rn.f32.u32 %f1, %r2;
    mov.u32 %r6, 0;
LOOP:
    st.volatile.shared.f32 [%r5], %f1;
    ld.volatile.shared.f32 %f2, [%r5];
    add.f32 %f1, %f2, 0f3F800000;
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p1, %r6, %r1;
    @%p1 bra LOOP;
    mov.u32 %r7, %ctaid.x;
    mov.u32 %r8, %ntid.x;
    mad.lo.u32 %r9, %r7, %r8, %r2;
    mul.wide.u32 %rd2, %r9, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.f32 [%rd3], %f1;
    ret;
}
"""


def launch_ptx(name: str, ptx: str, blocks: int, threads: int, out: torch.Tensor, iters: int) -> None:
    """Load PTX with the driver (it compiles it) and launch it on the current stream; torch made the context."""
    cuda = ctypes.CDLL("libcuda.so.1")
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    err = cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(ptx.encode()))
    if err:
        raise SystemExit(f"cuModuleLoadData failed: CUresult {err}")
    if cuda.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()):
        raise SystemExit(f"no function {name} in the PTX")
    p_out, p_iters = ctypes.c_uint64(out.data_ptr()), ctypes.c_uint32(iters)
    params = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(p_out), ctypes.c_void_p),
                                   ctypes.cast(ctypes.byref(p_iters), ctypes.c_void_p))
    cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_void_p]
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    err = cuda.cuLaunchKernel(fn, blocks, 1, 1, threads, 1, 1, 0, stream, params, None)
    if err:
        raise SystemExit(f"cuLaunchKernel failed: CUresult {err}")


def run(name: str) -> None:
    torch.cuda.nvtx.range_push("planted")
    if name == "strided":
        n, stride = 1 << 22, 8
        x = torch.randn(n * stride, device="cuda")
        out = torch.empty(n, device="cuda")
        strided_kernel[(triton.cdiv(n, 1024),)](x, out, n, STRIDE=stride, BLOCK=1024)
    elif name == "tail":
        # 128 threads and few registers: 16 programs at once per SM (the warp slots' limit on an H100)
        rows = torch.cuda.get_device_properties(0).multi_processor_count * 16 + 20
        x = torch.randn(rows * 512, device="cuda")
        out = torch.empty(rows, device="cuda")
        tail_kernel[(rows,)](x, out, 20000, BLOCK=512, num_warps=4)
    elif name == "healthy":
        x = torch.randn(8192 * 16384, device="cuda")
        out = torch.empty(8192, device="cuda")
        healthy_kernel[(8192,)](x, out, COLS=16384, BLOCK=2048, num_warps=4)
    elif name == "spill":
        x = torch.randn(1024 * 256, device="cuda")
        out = torch.empty(1024, device="cuda")
        spill_kernel[(1024 // 64,)](x, out, BLOCK=64, COLS=256, num_warps=1)
    elif name in ("conflict", "conflict_free"):
        kernel = f"shared_{name}_kernel"
        blocks = torch.cuda.get_device_properties(0).multi_processor_count * 4
        out = torch.empty(blocks * 256, device="cuda")
        ptx = SHARED_PTX.replace("NAME", kernel).replace("SHIFT", "7" if name == "conflict" else "2")
        launch_ptx(kernel, ptx, blocks, 256, out, iters=2000)
    else:
        raise SystemExit(f"unknown planted kernel {name!r}")
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    run(sys.argv[1])
