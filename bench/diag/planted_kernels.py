"""Kernels with a known bottleneck, to record small ncu reports that the diagnosis tests read on the CPU.

    python bench/diag/planted_kernels.py NAME            run one (under ncu)
    bash bench/diag/record_planted.sh                     record them all into $OUT (ncu, a GPU)

strided  every thread loads x[8 i]: 4 of each 32-byte sector used (an uncoalesced load that is all of the traffic)
tail     a compute-bound grid of one full wave and 20 programs more (on an H100: 132 SMs x 16 programs, + 20)
"""

from __future__ import annotations

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
    else:
        raise SystemExit(f"unknown planted kernel {name!r}")
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    run(sys.argv[1])
