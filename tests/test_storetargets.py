"""agent.harness.worker.storetargets: the parameters a kernel's stores can reach, read from its source, so that a GPU's
ablated call destroys what a launch may have written and not what it only read."""

from __future__ import annotations

import triton.language as tl
from triton.runtime.jit import JITFunction

from agent.harness.worker.storetargets import stored_parameters


class triton:  # noqa: N801  the compiler's JITFunction even under TRITON_INTERPRET=1 (set by other tests' workers)
    jit = JITFunction


@triton.jit
def glance(y_ptr, out_ptr, scratch_ptr, n, BLOCK: tl.constexpr):
    # KernelBench #23's hostile answer: reads the returned zeros, writes only a scratch buffer
    offs = tl.arange(0, BLOCK)
    v = tl.load(y_ptr + offs, mask=offs < n, other=0.0) + tl.load(out_ptr + offs, mask=offs < n, other=0.0)
    tl.store(scratch_ptr + offs, v, mask=offs < n)


@triton.jit
def _write(p, v, m):
    tl.store(p, v, mask=m)


@triton.jit
def _read(p, m):
    return tl.load(p, mask=m, other=0.0)


@triton.jit
def through_a_helper(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    base = out_ptr + 0
    ptrs = base + o
    _write(ptrs, _read(x_ptr + o, o < n), o < n)


@triton.jit
def block_pointer(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    bp = tl.make_block_ptr(base=out_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    tl.store(bp, tl.load(x_ptr + tl.arange(0, BLOCK)))


@triton.jit
def atomics(x_ptr, acc_ptr):
    tl.atomic_add(acc_ptr, tl.load(x_ptr))


@triton.jit
def descriptor(desc, x_ptr):
    desc.store([0, 0], tl.load(x_ptr + tl.arange(0, 16))[:, None] * 1.0)


@triton.jit
def keyword_pointer(x_ptr, out_ptr):
    tl.store(value=tl.load(x_ptr), pointer=out_ptr)


@triton.jit
def running_sum_in_the_output(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n, BLOCK):
        acc += tl.load(x_ptr + start + tl.arange(0, BLOCK))
    p = out_ptr
    for _ in range(2):
        p = p + 0
    tl.store(p + tl.arange(0, BLOCK), acc)


def make_factory_kernel():
    @triton.jit
    def inner_write(p, v):
        tl.store(p, v)

    @triton.jit
    def factory_kernel(x_ptr, out_ptr):
        inner_write(out_ptr, tl.load(x_ptr))

    return factory_kernel


def test_a_kernel_that_only_reads_the_returned_buffer_did_not_store_to_it():
    assert {"scratch_ptr"} <= stored_parameters(glance) and not stored_parameters(glance) & {"y_ptr", "out_ptr"}


def test_stores_are_followed_through_assignments_helpers_block_pointers_atomics_and_descriptors():
    for kernel, target in [(through_a_helper, "out_ptr"), (block_pointer, "out_ptr"), (atomics, "acc_ptr"),
                           (descriptor, "desc"), (keyword_pointer, "out_ptr"), (running_sum_in_the_output, "out_ptr"),
                           (make_factory_kernel(), "out_ptr")]:
        stored = stored_parameters(kernel)
        assert stored is not None and target in stored, kernel
        assert "x_ptr" not in stored, kernel  # what it only reads stays


def test_the_launchers_last_arguments_are_mapped_to_the_parameters_and_anything_else_destroys_every_tensor():
    import torch

    from agent.harness.worker.storetargets import stored_tensors

    y, out, scratch = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    names = ["y_ptr", "out_ptr", "scratch_ptr", "n", "BLOCK"]
    launcher = ((1, 1, 1, 0, None, None, None, None, None, y, out, scratch, 4, 4), {})
    every = [y, out, scratch]
    picked = stored_tensors(launcher, (names, frozenset({"scratch_ptr", "BLOCK"})), every, torch)
    assert len(picked) == 1 and picked[0] is scratch
    assert stored_tensors(launcher, (names, None), every, torch) is every  # source unreadable
    assert stored_tensors(((y, out, scratch, 4, 4), {}), (names, frozenset({"scratch_ptr"})), every, torch) is every
