"""agent.harness.worker.interpret: in CPU mode Triton's interpreter runs honest kernels the GPU compiler runs (a kernel
that reads a constant from its closure, a range loop's index used as a tensor, libdevice functions, the driver's
device queries, torch.cuda's queries and synchronize without CUDA). Each case
runs in a fresh interpreter process: TRITON_INTERPRET is read when a kernel is defined."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

PROGRAM = """
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
{install}

def make(block):
    BLOCK = tl.constexpr(block)

    @triton.jit
    def doubled(x, o):
        offs = tl.arange(0, BLOCK)
        tl.store(o + offs, tl.load(x + offs) * 2)

    return doubled


@triton.jit
def fused(x, o):
    offs = tl.arange(0, 4)
    tl.store(o + offs, libdevice.fma(tl.load(x + offs), 2.0, 1.0))


@triton.jit
def rows(x, o, ROWS, BLOCK: tl.constexpr):
    for row in range(tl.program_id(0), ROWS, tl.num_programs(0)):
        offs = row.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(o + row, tl.sum(tl.load(x + offs), axis=0))


@triton.jit
def wraps(o):
    offs = tl.arange(0, 4)
    w = tl.full([4], 2147483647, tl.int32) + offs  # int32's largest, plus 0..3: wraps past it
    tl.store(o + offs, (w < 0).to(tl.float32))


x, o = torch.arange(4.0), torch.empty(4)
{case}
print(o.tolist())
"""
# the driver: the device queries of Triton's tutorials (a CPU-only machine has no active driver)
DRIVER = """
active = triton.runtime.driver.active
dev = active.get_active_torch_device()
sms = active.utils.get_device_properties(dev.index)["multiprocessor_count"]
o = torch.tensor([float(dev.type == "cpu"), float(sms > 0), float(active.get_current_target().arch), 0.0])
"""
# torch.cuda's queries of Triton's persistent-kernel tutorials and a wrapper that synchronizes after its launch (a
# PyTorch without CUDA raises at each)
SYNCHRONIZE = """
sms = torch.cuda.get_device_properties("cuda").multi_processor_count
major, minor = torch.cuda.get_device_capability(torch.cuda.current_device())
fused[(1,)](x, o)
torch.cuda.synchronize()
o[3] = float(sms > 0 and major == 0 and not torch.cuda.is_available())
"""
CASES = {"closure": "make(4)[(1,)](x, o)", "libdevice": "fused[(1,)](x, o)", "range index": "rows[(3,)](x, o, 4, BLOCK=1)",
         "driver": DRIVER, "synchronize": SYNCHRONIZE}
EXPECTED = {"closure": "[0.0, 2.0, 4.0, 6.0]", "libdevice": "[1.0, 3.0, 5.0, 7.0]", "range index": "[0.0, 1.0, 2.0, 3.0]",
            "driver": "[1.0, 1.0, 0.0, 0.0]", "synchronize": "[1.0, 3.0, 5.0, 1.0]"}


def run(case: str, installed: bool, tmp_path: Path) -> subprocess.CompletedProcess:
    """The program from a file, as a candidate is loaded (the interpreter rewrites only kernels it has source for)."""
    install = "from agent.harness.worker import interpret\ninterpret.install()" if installed else ""
    program = tmp_path / "candidate.py"
    program.write_text(textwrap.dedent(PROGRAM).format(install=install, case=CASES[case]))
    return subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("case", list(CASES))
def test_the_interpreter_runs_what_the_compiler_runs_once_installed(case, tmp_path):
    done = run(case, installed=True, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == EXPECTED[case]


@pytest.mark.parametrize("case", list(CASES))
def test_without_it_the_interpreter_fails_on_the_same_kernel(case, tmp_path):
    """The fix is needed: Triton's own interpreter rejects these (if a Triton release fixes one, drop its fix)."""
    if case == "synchronize":
        import torch

        if torch.cuda.is_available():
            pytest.skip("with CUDA, torch.cuda.synchronize works: the fix is for PyTorch without it")
    assert run(case, installed=False, tmp_path=tmp_path).returncode != 0


def test_an_fp32_dot_at_default_precision_rounds_its_operands_to_tf32_as_a_gpu_does():
    """The interpreter multiplied in full fp32 whatever the dot asked: CPU mode certified default-precision tl.dot
    answers a GPU fails at the fp32 tolerance (13 public answers). ieee and tf32x3 stay exact."""
    import numpy as np

    from agent.harness.worker.interpret import _tf32

    x = np.array([1.0 + 2.0 ** -12, 1.0 + 2.0 ** -10, -3.14159265, np.inf, np.nan], dtype=np.float32)
    t = _tf32(x)
    assert t[0] == 1.0 and t[1] == 1.0 + 2.0 ** -10 and abs(t[2] + 3.14159265) < 2e-3 and t[2] != x[2]
    assert np.isinf(t[3]) and np.isnan(t[4])
    assert (t.view(np.uint32)[:3] & 0x1FFF == 0).all()  # 10 mantissa bits left


LIBDEVICE_KERNEL = """
import torch, triton, triton.language as tl
from triton.language.extra import libdevice

@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    m = o < n
    x = tl.load(x_ptr + o, mask=m)
    tl.store(y_ptr + o, libdevice.tanh(x) + libdevice.pow(x, 2.0) + libdevice.atan2(x, x + 3.0), mask=m)

x = torch.randn(100)
y = torch.empty(100)
k[(1,)](x, y, 100, BLOCK=128)
print(float((y - (torch.tanh(x) + x ** 2 + torch.atan2(x, x + 3))).abs().max()))
"""


def test_libdevice_functions_without_a_math_twin_compute_in_cpu_mode():
    """libdevice.tanh (4 public answers: runtime_error in CPU mode, the stub returned None), pow and atan2 compute
    as on the GPU, in the operands' dtype."""
    import os
    import subprocess
    import sys

    code = "from agent.harness.worker import interpret\ninterpret.install()\n" + LIBDEVICE_KERNEL
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TRITON_INTERPRET": "1"})
    assert r.returncode == 0, r.stderr[-1500:]
    assert float(r.stdout.strip().splitlines()[-1]) < 1e-5


HELPERS = """
import time
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter
{install}

calls = []
patch_builtin = interpreter._patch_builtin


def counted(*args):  # the costly part of patching the language: inspect over a whole module
    calls.append(args[0])
    return patch_builtin(*args)


interpreter._patch_builtin = counted


@triton.jit
def twice(v):
    return v * 2


@triton.jit
def _core(v):
    return tl.core.maximum(v, 0.0)


@triton.jit
def helpers(x, o, N, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(N):
        acc += twice(tl.load(x + i * BLOCK + tl.arange(0, BLOCK)))
    tl.store(o + tl.arange(0, BLOCK), _core(acc - 3.0))


x, o = torch.arange(32.0), torch.empty(4)
t0 = time.perf_counter()
helpers[(1,)](x, o, 8, BLOCK=4)
print(len(calls), round(time.perf_counter() - t0, 3))
print(o.tolist())
"""


def test_a_helper_called_in_a_loop_does_not_patch_the_language_again_and_computes_the_same(tmp_path):
    """Triton's interpreter re-patched triton.language at every call of a jit helper (inspect over whole modules):
    a third of CPU mode's time for kernels that call one in a loop. Installed, the repeat is skipped where nothing
    is left to patch; the output is the same, and a helper reading tl.core (unpatched by its kernel) still works."""
    out = {}
    for installed in (False, True):
        program = tmp_path / f"helpers_{installed}.py"
        install = "from agent.harness.worker import interpret\ninterpret.install()" if installed else ""
        program.write_text(textwrap.dedent(HELPERS).format(install=install))
        done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120, cwd=REPO,
                              env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)})
        assert done.returncode == 0, done.stderr[-2000:]
        counts, result = done.stdout.strip().splitlines()[-2:]
        out[installed] = (int(counts.split()[0]), result)
    assert out[True][1] == out[False][1] == str([float(max(0, 2 * sum(range(k, 32, 4)) - 3)) for k in range(4)])
    # the launch patches tl, tl.tensor, tl.math and the descriptors (Triton 3.9: 43 module scans before, 7 after);
    # each of the nine helper calls did it all again
    assert out[False][0] - out[True][0] >= 9 * 4 and out[True][0] < out[False][0] / 4


def test_the_int32_overflow_checks_whose_assert_is_dead_are_not_computed_and_integers_wrap_as_before(tmp_path):
    """Without debug the interpreter's device_assert does nothing, yet every int32 add, sub and mul computed its
    overflow check first (~70 % of a KernelBench #96 answer's validation): installed, the checks are not computed; an
    int32 sum past the largest wraps as it did, and as a compiled kernel's does."""
    from triton.runtime import interpreter

    for installed in (False, True):
        program = tmp_path / f"candidate_{installed}.py"
        program.write_text(textwrap.dedent(PROGRAM).format(
            install="from agent.harness.worker import interpret\ninterpret.install()" if installed else "",
            case="wraps[(1,)](o)\nfrom triton.runtime import interpreter as i\n"
                 "print(i.interpreter_builder.options.sanitize_overflow, i.interpreter_builder.options.debug)"))
        done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120, cwd=REPO,
                              env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)})
        assert done.returncode == 0, done.stderr[-2000:]
        checks, result = done.stdout.strip().splitlines()[-2:]
        assert result == "[0.0, 1.0, 1.0, 1.0]" and checks == f"{not installed} False"
    assert hasattr(interpreter.InterpreterOptions(), "sanitize_overflow")  # the Triton this runs on has the checks
