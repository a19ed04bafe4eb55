"""GAP forwards (x of N x C x H x W -> its mean over H x W times a multiplier, N x C) with one planted bottleneck each,
for the diagnosis's ordering check (bench/diag/planted_profile.py profiles them on a GPU; tests/test_planted_gap.py runs
each under TRITON_INTERPRET=1 at a tiny size against torch).

    kind              what is planted                                                  the cause to find first
    healthy           one program per row, contiguous 2048-wide loads                   none: at the DRAM roof
    uncoalesced_load  each load instruction reads every 8th float of the row            uncoalesced-load
    tail              equal latency-bound runs: one full wave of programs + 1/8 of the SMs tail
    small_grid        one program per batch image: 16 programs on 132 SMs               small-grid
    spill             a 64 x 512 tile held live per program of 4 warps (256 per thread)  spills
    one_warp          programs of one warp, one value per thread: the per-SM limit binds low-occupancy, block limit
    launches          one single-program launch per row: 2048 launches a forward        launch-bound
    bank_conflicts    shared memory at tid * 128 bytes, all 32 threads in one bank (PTX) bank-conflicts
    uncoalesced_store the scaled input written channels-last, then reduced by torch      uncoalesced-store
    int64_index       a flat index past 2**32 split by a 64-bit / and % per element     issue-bound (integer)
    serial_tail       partial sums, then the last program reduces all rows in a loop    imbalance
    unfused           one kernel writes x * multiplier, a second reads it back to reduce unfused (intermediate)

Each `forward(kind, x, multiplier)` returns the N x C result and launches only the kind's own kernels (named
gap_<something>_kernel), so ncu's --kernel-name filter keeps exactly them. Sizes are the shape's: the constants scale
down for a tiny shape (TRITON_INTERPRET=1 on a CPU), and up to gap44's GAP input (16 x 128 x 256 x 256) on a GPU.
bank_conflicts needs the CUDA driver (PTX: Triton swizzles its own shared layouts) and has no CPU form.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

KINDS = ("healthy", "uncoalesced_load", "tail", "small_grid", "spill", "one_warp", "launches", "bank_conflicts",
         "uncoalesced_store", "int64_index", "serial_tail", "unfused")
GPU_ONLY = ("bank_conflicts",)
FULL_SHAPE = (16, 128, 256, 256)  # gap44's GAP input: the ConvTranspose2d's output
TINY_SHAPE = (2, 4, 16, 16)


@triton.jit
def gap_rows_kernel(x_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * HW
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, HW, BLOCK):
        offs = c + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


@triton.jit
def gap_strided_kernel(x_ptr, out_ptr, HW, scale, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    # thread i reads element i * STRIDE + j: one float of every 32-byte sector per load instruction
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * HW
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, HW, BLOCK * STRIDE):
        for j in tl.static_range(STRIDE):
            offs = c + tl.arange(0, BLOCK) * STRIDE + j
            acc += tl.load(base + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


@triton.jit
def gap_pieces_kernel(x_ptr, out_ptr, HW, total, per_program, scale, BLOCK: tl.constexpr):
    # equal runs of the flat input, one BLOCK (one value per thread) at a time: few bytes in flight, so a program
    # takes as long alone as in a full wave; a run's sum goes to its row whenever the row changes
    start = tl.program_id(0).to(tl.int64) * per_program
    cur = start // HW
    acc = tl.sum(tl.zeros([BLOCK], dtype=tl.float32), axis=0)
    for i in range(0, per_program, BLOCK):
        off = start + i
        if off < total:
            row = off // HW
            flush = row != cur
            tl.atomic_add(out_ptr + cur, acc * scale, mask=flush)
            acc = tl.where(flush, 0.0, acc)
            cur = row
            acc += tl.sum(tl.load(x_ptr + off + tl.arange(0, BLOCK)), axis=0)
    tl.atomic_add(out_ptr + cur, acc * scale, mask=start < total)


@triton.jit
def gap_batch_kernel(x_ptr, out_ptr, C, HW, scale, BLOCK: tl.constexpr):
    n = tl.program_id(0)
    for ch in range(C):
        row = n * C + ch
        base = x_ptr + row.to(tl.int64) * HW
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for c in range(0, HW, BLOCK):
            offs = c + tl.arange(0, BLOCK)
            acc += tl.load(base + offs, mask=offs < HW, other=0.0)
        tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


@triton.jit
def gap_spill_kernel(x_ptr, out_ptr, HW, scale, R: tl.constexpr, COLS: tl.constexpr):
    # the whole R x COLS tile stays live until its column maxima exist: sum(v - m) + R m is the plain sum
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * HW
    total = 0.0
    for c in range(0, HW, R * COLS):
        v = tl.load(base + c + tl.arange(0, R)[:, None] * COLS + tl.arange(0, COLS)[None, :])
        m = tl.max(v, axis=0)
        total += tl.sum(tl.sum(v - m[None, :], axis=0) + m * R, axis=0)
    tl.store(out_ptr + row, total * scale)


@triton.jit
def gap_warp_kernel(x_ptr, out_ptr, HW, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * HW
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, HW, BLOCK):
        offs = c + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


@triton.jit(do_not_specialize=["row"])  # row 1 would be a constexpr int (Triton specializes 1), not a tensor
def gap_one_row_kernel(x_ptr, out_ptr, row, HW, scale, BLOCK: tl.constexpr):
    base = x_ptr + row.to(tl.int64) * HW
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, HW, BLOCK):
        offs = c + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


@triton.jit
def gap_channels_last_kernel(x_ptr, y_ptr, C, HW, scale, BLOCK: tl.constexpr):
    # y[n, hw, c] = x[n, c, hw] * scale: contiguous loads, stores C floats apart
    row = tl.program_id(0)
    n, ch = row // C, row % C
    src = x_ptr + row.to(tl.int64) * HW
    dst = y_ptr + n.to(tl.int64) * HW * C + ch
    for c in range(0, HW, BLOCK):
        offs = c + tl.arange(0, BLOCK)
        mask = offs < HW
        tl.store(dst + offs.to(tl.int64) * C, tl.load(src + offs, mask=mask, other=0.0) * scale, mask=mask)


@triton.jit
def gap_flat_index_kernel(x_ptr, out_ptr, HW, rows, base, scale, BLOCK: tl.constexpr):
    # a flat int64 index per element, split into (row, column) by a 64-bit division and remainder in the inner loop;
    # the index is offset by `base` (a multiple of HW past 2**32, as in a tensor of more than 2**32 elements), so the
    # division takes its full 64-bit path, not the 32-bit one a small index would
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    hw = HW.to(tl.int64)
    for c in range(0, HW, BLOCK):
        flat = base + pid.to(tl.int64) * hw + c + tl.arange(0, BLOCK).to(tl.int64)
        r, col = flat // hw - base // hw, flat % hw
        acc += tl.load(x_ptr + r * hw + col, mask=(col < hw) & (r < rows), other=0.0)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0) * scale)


@triton.jit
def gap_ticket_kernel(x_ptr, partial_ptr, out_ptr, ticket_ptr, HW, rows, scale, SPLIT: tl.constexpr,
                      BLOCK: tl.constexpr):
    # SPLIT programs per row write partial sums; the last program to finish adds them up, one row after another
    pid = tl.program_id(0)
    row, part = pid // SPLIT, pid % SPLIT
    span = HW // SPLIT
    base = x_ptr + row.to(tl.int64) * HW + part * span
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, span, BLOCK):
        offs = c + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < span, other=0.0)
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))
    ticket = tl.atomic_add(ticket_ptr, 1)
    if ticket == rows * SPLIT - 1:
        for r in range(rows):
            parts = tl.load(partial_ptr + r * SPLIT + tl.arange(0, SPLIT), cache_modifier=".cg")
            tl.store(out_ptr + r, tl.sum(parts, axis=0) * scale)
        tl.store(ticket_ptr, 0)


@triton.jit
def gap_scale_kernel(x_ptr, y_ptr, numel, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0.0) * scale, mask=mask)


def _block(hw: int, want: int) -> int:
    return min(want, triton.next_power_of_2(hw))


def programs_per_sm(compiled, num_warps: int, props) -> int:
    """Programs one SM holds at once by the compiled kernel's registers and its warps (the block cap 32 on sm_80+)."""
    regs = max(int(getattr(compiled, "n_regs", 0) or 0), 1)
    regs_per_warp = -(-regs * 32 // 256) * 256
    by_regs = props.regs_per_multiprocessor // (regs_per_warp * num_warps)
    by_warps = props.max_threads_per_multi_processor // (32 * num_warps)
    return max(1, min(32, by_regs, by_warps))


@functools.lru_cache(maxsize=None)
def _tail_grid(device: int, hw: int, numel: int, block: int) -> int:
    """One full wave of the pieces kernel and 1/8 of the SMs more, found once (not on every forward: the compile lookup
    would be host time the forward does not otherwise spend)."""
    props = torch.cuda.get_device_properties(device)
    try:  # compiled without a launch (ncu sees no extra one): its registers decide how many fit an SM
        probe = torch.empty(1, device=f"cuda:{device}")
        compiled = gap_pieces_kernel.warmup(probe, probe, hw, numel, block, 1.0, BLOCK=block, num_warps=4, grid=(1,))
        getattr(compiled, "_init_handles", lambda: None)()
        per_sm = programs_per_sm(compiled, 4, props)
    except Exception:  # noqa: BLE001 - a Triton without warmup: 4 warps and few registers fit 16 an SM
        per_sm = 16
    return props.multi_processor_count * per_sm + max(1, props.multi_processor_count // 8)


def forward(kind: str, x: torch.Tensor, multiplier: float = 0.5) -> torch.Tensor:
    """The kind's GAP of x (N, C, H, W) -> (N, C): x * multiplier averaged over H x W."""
    n, c, h, w = x.shape
    hw, rows = h * w, n * c
    scale = multiplier / hw
    out = torch.zeros(rows, device=x.device, dtype=torch.float32)
    if kind == "healthy":
        gap_rows_kernel[(rows,)](x, out, hw, scale, BLOCK=_block(hw, 2048), num_warps=4)
    elif kind == "uncoalesced_load":
        stride = 8
        gap_strided_kernel[(rows,)](x, out, hw, scale, STRIDE=stride, BLOCK=_block(hw // stride, 1024), num_warps=4)
    elif kind == "tail":
        block = _block(hw, 128)
        grid = _tail_grid(x.device.index or 0, hw, x.numel(), block) if x.is_cuda else 5
        per_program = triton.cdiv(triton.cdiv(x.numel(), grid), block) * block
        gap_pieces_kernel[(grid,)](x, out, hw, x.numel(), per_program, scale, BLOCK=block, num_warps=4)
    elif kind == "small_grid":
        gap_batch_kernel[(n,)](x, out, c, hw, scale, BLOCK=_block(hw, 2048), num_warps=4)
    elif kind == "spill":
        r, cols = (64, 512) if hw % (64 * 512) == 0 else (4, 16)
        gap_spill_kernel[(rows,)](x, out, hw, scale, R=r, COLS=cols, num_warps=4)
    elif kind == "one_warp":
        gap_warp_kernel[(rows,)](x, out, hw, scale, BLOCK=_block(hw, 32), num_warps=1)  # one value per thread
    elif kind == "launches":
        for row in range(rows):
            gap_one_row_kernel[(1,)](x, out, row, hw, scale, BLOCK=_block(hw, 2048), num_warps=4)
    elif kind == "bank_conflicts":
        return _bank_conflicts(x, multiplier)
    elif kind == "uncoalesced_store":
        y = torch.empty((n, h, w, c), device=x.device, dtype=torch.float32)
        gap_channels_last_kernel[(rows,)](x, y, c, hw, multiplier, BLOCK=_block(hw, 1024), num_warps=4)
        return y.mean(dim=(1, 2))
    elif kind == "int64_index":
        gap_flat_index_kernel[(rows,)](x, out, hw, rows, hw << 24, scale, BLOCK=_block(hw, 1024), num_warps=4)
    elif kind == "serial_tail":
        split = 4
        partial = torch.empty(rows * split, device=x.device, dtype=torch.float32)
        ticket = torch.zeros(1, device=x.device, dtype=torch.int32)
        gap_ticket_kernel[(rows * split,)](x, partial, out, ticket, hw, rows, scale, SPLIT=split,
                                           BLOCK=_block(hw // split, 1024), num_warps=4)
    elif kind == "unfused":
        y = torch.empty_like(x)
        block = 4096 if x.numel() % 4096 == 0 else 64
        gap_scale_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), multiplier, BLOCK=block, num_warps=4)
        gap_rows_kernel[(rows,)](y, out, hw, 1.0 / hw, BLOCK=_block(hw, 2048), num_warps=4)
    else:
        raise ValueError(f"unknown planted kind {kind!r}; known: {', '.join(KINDS)}")
    return out.view(n, c)


# ---------------------------------------------------------------- bank conflicts (PTX through the driver)

SHARED_PTX = """
.version 8.0
.target sm_90
.address_size 64

.visible .entry gap_shared_conflict_kernel(.param .u64 x, .param .u64 out, .param .u32 hw, .param .f32 scale)
{
    .reg .pred %p<3>;
    .reg .b32 %r<16>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<8>;
    .shared .align 16 .b8 tile[32768];

    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [hw];
    ld.param.f32 %f7, [scale];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    // each thread sums elements tid, tid + 256, ... of row ctaid, keeping its running sum in shared memory at
    // tid * 128 bytes: the 32 threads of a warp all hit bank 0 on every store and load
    shl.b32 %r4, %r2, 7;
    mov.u32 %r5, tile;
    add.u32 %r6, %r5, %r4;
    mov.f32 %f1, 0f00000000;
    st.volatile.shared.f32 [%r6], %f1;
    cvt.u64.u32 %rd3, %r3;
    cvt.u64.u32 %rd4, %r1;
    mul.lo.u64 %rd5, %rd3, %rd4;
    mov.u32 %r7, %r2;
LOOP:
    setp.ge.u32 %p1, %r7, %r1;
    @%p1 bra DONE;
    cvt.u64.u32 %rd6, %r7;
    add.u64 %rd6, %rd6, %rd5;
    shl.b64 %rd6, %rd6, 2;
    add.u64 %rd6, %rd6, %rd1;
    ld.global.f32 %f2, [%rd6];
    ld.volatile.shared.f32 %f3, [%r6];
    add.f32 %f3, %f3, %f2;
    st.volatile.shared.f32 [%r6], %f3;
    add.u32 %r7, %r7, 256;
    bra LOOP;
DONE:
    ld.volatile.shared.f32 %f4, [%r6];
    mul.f32 %f4, %f4, %f7;
    cvt.u64.u32 %rd7, %r3;
    shl.b64 %rd7, %rd7, 2;
    add.u64 %rd7, %rd7, %rd2;
    red.global.add.f32 [%rd7], %f4;
    ret;
}
"""


def _bank_conflicts(x: torch.Tensor, multiplier: float) -> torch.Tensor:
    """One program of 256 threads per row; each thread's partial sum lives in a bank-conflicted shared slot."""
    import ctypes

    if not x.is_cuda:
        raise RuntimeError("bank_conflicts is PTX loaded by the CUDA driver: it needs a GPU")
    n, c, h, w = x.shape
    out = torch.zeros(n * c, device=x.device, dtype=torch.float32)
    cuda = ctypes.CDLL("libcuda.so.1")
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    if err := cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(SHARED_PTX.encode())):
        raise RuntimeError(f"cuModuleLoadData failed: CUresult {err}")
    if err := cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"gap_shared_conflict_kernel"):
        raise RuntimeError(f"cuModuleGetFunction failed: CUresult {err}")
    args = [ctypes.c_uint64(x.data_ptr()), ctypes.c_uint64(out.data_ptr()), ctypes.c_uint32(h * w),
            ctypes.c_float(multiplier / (h * w))]
    params = (ctypes.c_void_p * len(args))(*(ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args))
    cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_void_p]
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    if err := cuda.cuLaunchKernel(fn, n * c, 1, 1, 256, 1, 1, 0, stream, params, None):
        raise RuntimeError(f"cuLaunchKernel failed: CUresult {err}")
    return out.view(n, c)


def kernel_names(kind: str) -> list[str]:
    """The kernels a kind launches (ncu's --kernel-name filter)."""
    return {
        "healthy": ["gap_rows_kernel"], "uncoalesced_load": ["gap_strided_kernel"], "tail": ["gap_pieces_kernel"],
        "small_grid": ["gap_batch_kernel"], "spill": ["gap_spill_kernel"], "one_warp": ["gap_warp_kernel"],
        "launches": ["gap_one_row_kernel"], "bank_conflicts": ["gap_shared_conflict_kernel"],
        "uncoalesced_store": ["gap_channels_last_kernel"], "int64_index": ["gap_flat_index_kernel"],
        "serial_tail": ["gap_ticket_kernel"], "unfused": ["gap_scale_kernel", "gap_rows_kernel"],
    }[kind]
