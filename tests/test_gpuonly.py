"""agent.harness.static.gpuonly: what CPU mode cannot judge (a device or interpreter branch whose paths do different work,
a CUDA requirement met at run time), and that this is a verdict of its own only on the CPU."""

from __future__ import annotations

import textwrap

import pytest

from agent.harness.static.gpuonly import cpu_cannot_judge, cuda_required
from agent.schema import EvalResult, Verdict

HEAD = """
import os
import contextlib
import torch
import torch.nn as nn
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def k2(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass


def launch(x):
    out = torch.empty_like(x)
    k[(1,)](x, out, x.numel(), BLOCK=1024)
    return out
"""


def why(body: str) -> str | None:
    return cpu_cannot_judge(HEAD + textwrap.dedent(body))


@pytest.mark.parametrize("body", [
    # Triton only under the interpreter, PyTorch on a GPU
    """
    class ModelNew(nn.Module):
        def forward(self, x):
            if INTERPRET:
                return launch(x)
            return torch.mean(x)
    """,
    # PyTorch off CUDA (an early return), the kernel on it
    """
    def f(x):
        if not x.is_cuda:
            return x * 2
        return launch(x)
    """,
    """
    def f(x):
        return launch(x) if x.device.type == "cuda" else x.clone()
    """,
    """
    def f(x):
        fn = launch if os.getenv("TRITON_INTERPRET") else torch.relu
        return fn(x)
    """,
    # different kernels on each side (a TMA kernel on CUDA)
    """
    def f(x, out):
        if x.is_cuda and x.numel() % 4 == 0:
            k2[(1,)](x, out, 1, BLOCK=16)
        else:
            k[(1,)](x, out, 1, BLOCK=16)
    """,
    # the signal through a helper, a self attribute, a device string
    """
    def _on_gpu(t):
        return t.is_cuda
    def f(x):
        if _on_gpu(x):
            return torch.mean(x)
        return launch(x)
    """,
    """
    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.gpu = torch.cuda.is_available()
        def forward(self, x):
            if self.gpu:
                return torch.mean(x)
            return launch(x)
    """,
    """
    def f(x):
        if str(x.device) == "cpu":
            return launch(x)
        raise RuntimeError("unsupported")
    """,
    # at import: ModelNew rebound, a helper defined two ways
    """
    class ModelNew(nn.Module):
        def forward(self, x):
            return launch(x)
    class Eager(nn.Module):
        def forward(self, x):
            return torch.mean(x)
    if "TRITON_INTERPRET" not in os.environ:
        ModelNew = Eager
    """,
    """
    if INTERPRET:
        def impl(x):
            return launch(x)
    else:
        def impl(x):
            return torch.mean(x)
    class ModelNew(nn.Module):
        def forward(self, x):
            return impl(x)
    """,
    # the other shapes of a branch: and/or, match, a lookup table, a loop, a CUDA-only build or device index
    """
    def f(x):
        return x.is_cuda and torch.mean(x) or launch(x)
    """,
    """
    def f(x):
        match x.device.type:
            case "cuda":
                return torch.mean(x)
            case _:
                return launch(x)
    """,
    """
    IMPLS = {"cuda": torch.mean, "cpu": launch}
    def f(x):
        return IMPLS[x.device.type](x)
    """,
    """
    def f(x):
        if torch.version.cuda:
            return torch.mean(x)
        return launch(x)
    """,
    # the same calls, other math: a constant in arithmetic, or a kernel's operand passed by position
    """
    def f(x):
        return x * 2 if x.is_cuda else x * 3
    """,
    """
    def f(x, out):
        if x.is_cuda:
            k[(1,)](x, out, 2.0, BLOCK=1024)
        else:
            k[(1,)](x, out, 3.0, BLOCK=64)
    """,
    # a value a device branch chose, branched on later (a flag, a block size)
    """
    def f(x):
        if x.is_cuda:
            mode = 1
        else:
            mode = 0
        if mode:
            return torch.mean(x)
        return launch(x)
    """,
    """
    def f(x):
        block = 4096 if x.is_cuda else 128
        if x.numel() <= block:
            return torch.mean(x)
        return launch(x)
    """,
    # a signal passed into a kernel, which branches on it; a table read with .get; a class attribute
    """
    @triton.jit
    def k3(x_ptr, out_ptr, ON_GPU: tl.constexpr):
        if ON_GPU:
            tl.store(out_ptr, tl.load(x_ptr) * 2)
        else:
            tl.store(out_ptr, tl.load(x_ptr))
    def f(x, out):
        k3[(1,)](x, out, ON_GPU=x.is_cuda)
    """,
    """
    IMPLS = {"cuda": torch.mean, "cpu": launch}
    def f(x):
        return IMPLS.get(str(x.device.type), launch)(x)
    """,
    """
    class ModelNew(nn.Module):
        GPU = torch.cuda.is_available()
        def forward(self, x):
            return torch.mean(x) if self.GPU else launch(x)
    """,
    """
    def f(x):
        if x.get_device() >= 0:
            return torch.mean(x)
        return launch(x)
    """,
    # a kernel the GPU's compiler may refuse where the interpreter ran it, PyTorch in the handler
    """
    def f(x):
        try:
            return launch(x)
        except Exception:
            return torch.mean(x)
    """,
    """
    def f(x):
        try:
            torch.cuda.current_device()
            return torch.mean(x)
        except (AssertionError, RuntimeError):
            return launch(x)
    """,
])
def test_a_branch_whose_paths_do_different_work_cannot_be_judged_on_the_cpu(body):
    found = why(body)
    assert found is not None and "line" in found and "GPU" in found and len(found.splitlines()) == 1


@pytest.mark.parametrize("body", [
    # constants only: block sizes, a precision string, a device string
    """
    BLOCK = 64 if INTERPRET else 1024
    def f(x, out):
        k[(1,)](x, out, x.numel(), BLOCK=256 if x.is_cuda else 64)
        p = "tf32x3" if x.is_cuda else "ieee"
        d = "cuda" if torch.cuda.is_available() else "cpu"
    """,
    # device plumbing: guards, queries, a null context, the allocator hook
    """
    def f(x):
        ctx = torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext()
        with ctx:
            return launch(x)
    def sms(device):
        if device.type == "cuda":
            return torch.cuda.get_device_properties(device).multi_processor_count
        return 4
    def alloc(size, align, stream):
        return torch.empty(size, dtype=torch.int8)
    if torch.cuda.is_available():
        triton.set_allocator(alloc)
    """,
    # the same launches on both sides, one under a device guard
    """
    def f(x, out):
        if x.is_cuda:
            with torch.cuda.device(x.device):
                k[(1,)](x, out, 1, BLOCK=16)
        else:
            k[(1,)](x, out, 1, BLOCK=16)
    """,
    # a self-check at import whose names nothing else reads; a branch on anything but the device
    """
    class ModelNew(nn.Module):
        def forward(self, x):
            return launch(x)
    if torch.cuda.is_available():
        _m = ModelNew().cuda()
        torch.testing.assert_close(_m(torch.ones(4, device="cuda")), torch.ones(4, device="cuda"))
    def g(x):
        if x.numel() > 4096:
            return torch.mean(x)
        return launch(x)
    """,
    # tuning knobs by keyword, on statements of the same shape
    """
    def f(x, out):
        if x.is_cuda:
            k[(1,)](x, out, x.numel(), BLOCK=1024, num_warps=8)
        else:
            k[(1,)](x, out, x.numel(), BLOCK=64, num_warps=1)
    """,
    # a handler that logs and raises again: a failure on either device, not another path
    """
    def f(x):
        try:
            return launch(x)
        except Exception:
            print("launch failed")
            raise
    """,
    # constants chosen by the device, through a helper and into a kernel's loop
    """
    def config(on_gpu):
        return (1024, 8) if on_gpu else (64, 1)
    def f(x, out):
        block, warps = config(x.is_cuda)
        k[(1,)](x, out, x.numel(), BLOCK=block, num_warps=warps)
        k[(1,)](x, out, x.numel(), BLOCK=128 if os.environ.get("TRITON_INTERPRET") else 512)
    """,
    # an assert on the device is judged where it runs (cuda_required)
    """
    def f(x):
        assert x.is_cuda or INTERPRET
        return launch(x)
    """,
])
def test_branches_that_run_the_same_work_are_judged_on_the_cpu(body):
    assert why(body) is None


@pytest.mark.parametrize("message, needs", [
    ("AssertionError:  (candidate line 31: `assert x.is_cuda`)", True),
    ("AssertionError: Torch not compiled with CUDA enabled (candidate line 9: `torch.cuda.set_device(0)`)", True),
    ("RuntimeError: this kernel requires a GPU", True),
    ("ValueError: expected x.device.type == 'cuda'", True),
    ("RuntimeError: shape mismatch (candidate line 4: `y = x.view(3, -1)`)", False),
    ("IndexError: cuda index out of range", False),  # not a requirement's exception
    ("NameError: name 'cuda_out' is not defined", False),
])
def test_a_cuda_requirement_in_the_workers_error(message, needs):
    assert cuda_required(message) is needs


def test_needs_gpu_is_neither_correct_nor_a_failure_and_never_fed_back_as_one():
    from agent.prompts import feedback as _feedback

    assert not Verdict.NEEDS_GPU.failed and not Verdict.CORRECT.failed
    assert all(v.failed for v in Verdict if v not in (Verdict.CORRECT, Verdict.NEEDS_GPU))
    results = [EvalResult(verdict=Verdict.NEEDS_GPU, message="CPU mode cannot judge this answer", device="cpu"),
               EvalResult(verdict=Verdict.INCORRECT, message="wrong", device="cpu")]
    assert [f.verdict for f in _feedback(results)] == [Verdict.INCORRECT]


def test_only_the_cpu_refuses_to_judge_a_device_branch():
    """On a GPU the same answer goes on to be run and judged as any other (the static stage hands it on)."""
    from pathlib import Path

    from agent.harness import EvalRequest
    from agent.harness.pipeline import _static
    from agent.problems import load_problem
    from agent.stages import get_stage

    source = (Path(__file__).parent / "candidates" / "interpreter_only_triton.py").read_text()
    req = EvalRequest(source=source, problem=load_problem("gap44"), stage=get_stage("memory-fusion"), device="cpu")
    on_cpu = _static(req, "cpu")
    assert isinstance(on_cpu, EvalResult) and on_cpu.verdict == Verdict.NEEDS_GPU and "INTERPRET" in on_cpu.message
    on_gpu = _static(req, "cuda")
    assert isinstance(on_gpu, tuple) and on_gpu[1] == ["gap_kernel"]


def test_a_name_is_a_signal_only_in_the_function_that_binds_it_and_closures_inside_it():
    """The offline window family: a kernel's local `p = tl.load(... TILES ...)` (TILES from a device-chosen tile)
    says nothing of the wrapper's `p` (the padding) passed as PAD: judged on the CPU (was needs_gpu). A closure reading
    its outer function's device flag still branches on the device."""
    kernels = textwrap.dedent("""
        import torch
        import triton
        import triton.language as tl


        @triton.jit
        def combine(part_ptr, out_ptr, TILES, BLOCK: tl.constexpr):
            p = tl.load(part_ptr + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < TILES, other=0.0)
            tl.store(out_ptr, tl.sum(p, axis=0))


        @triton.jit
        def work(x_ptr, part_ptr, PAD: tl.constexpr, BLOCK: tl.constexpr):
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for a in tl.static_range(3):
                if (a + PAD) % 2 == 0:
                    acc += tl.load(x_ptr + tl.arange(0, BLOCK))
            tl.store(part_ptr + tl.arange(0, BLOCK), acc)
        """)
    honest = kernels + textwrap.dedent("""
        def gap(x, p):
            BLOCK = 64 if x.is_cuda else 1024
            TILES = triton.cdiv(x.numel(), BLOCK)
            part = torch.empty(BLOCK, device=x.device)
            out = torch.empty(1, device=x.device)
            work[(1,)](x, part, PAD=p, BLOCK=BLOCK)
            combine[(1,)](part, out, TILES, BLOCK=BLOCK)
            return out
        """)
    assert cpu_cannot_judge(honest) is None
    closure = kernels + textwrap.dedent("""
        def gap(x, p):
            gpu = x.is_cuda

            def run():
                if gpu:
                    part = torch.empty(64, device=x.device)
                    work[(1,)](x, part, PAD=p, BLOCK=64)
                    return part
                return x.mean()
            return run()
        """)
    assert "branches on `gpu`" in (cpu_cannot_judge(closure) or "")
