"""agent.harness.static.policy: static rules on the candidate's AST, checked before anything runs."""

from __future__ import annotations

import textwrap

import pytest

from agent.harness.static.policy import check, kernel_names
from agent.problems import load_problem, starting_code
from agent.schema import StageRules

FUSION = StageRules(forbid_store_then_load=True)
ABSENT = ["tl.tanh", "tl.sigmoid", "tl.gelu", "tl.silu", "tl.softmax", "tl.mish"]

HEADER = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        k[(1,)](x, out, x.numel(), BLOCK=1024)
        return out
"""


def rules_of(extra: str, stage: StageRules = StageRules(), absent: list[str] = ABSENT) -> set[str]:
    return {v.rule for v in check(HEADER + textwrap.dedent(extra), stage, absent)}


def test_accepts_the_seed_starting_kernel():
    assert check(starting_code(load_problem("gap44")), FUSION, ABSENT) == []


def test_accepts_a_plain_kernel_module():
    assert rules_of("") == set()


def test_kernel_names_include_autotuned_kernels():
    code = HEADER + textwrap.dedent("""
        @triton.autotune(configs=[triton.Config({'BLOCK': 64})], key=['n'])
        @triton.jit
        def tuned(x_ptr, n, BLOCK: tl.constexpr):
            pass

        def helper():
            pass
    """)
    assert kernel_names(code) == ["k", "tuned"]


def test_kernel_names_through_aliases():
    assert kernel_names("from triton import jit\n\n@jit\ndef a(x):\n    pass\n") == ["a"]


def test_a_function_jitted_by_a_call_is_a_kernel():
    code = "import triton\n\ndef _body(x_ptr):\n    pass\n\nkernel = triton.jit(_body)\n\ndef helper():\n    pass\n"
    assert kernel_names(code) == ["_body"]
    assert check(code, FUSION, ABSENT) == []
    assert "no-kernel" in {v.rule for v in check(code.replace("triton.jit(_body)", "_body"), FUSION, ABSENT)}


@pytest.mark.parametrize("line", ["import os.path", "from os import system", "import subprocess", "import socket", "import ctypes", "import importlib",
                                  "import sys", "import numpy", "from pathlib import Path", "import pickle"])
def test_rejects_imports_outside_the_allow_list(line):
    assert "import" in rules_of(line)


@pytest.mark.parametrize("line", ["import math", "import functools", "from typing import Optional",
                                  "import torch.nn.functional as F", "from triton.language.extra import libdevice"])
def test_allows_harmless_imports(line):
    assert rules_of(line) == set()


@pytest.mark.parametrize("line", ["open('/etc/passwd')", "eval('1')", "exec('x = 1')", "__import__('os')",
                                  "compile('1', 'f', 'eval')", "globals()", "vars(torch)", "setattr(torch, 'mean', None)"])
def test_rejects_builtins_that_reach_files_code_or_globals(line):
    assert rules_of(line) & {"file", "exec", "import", "escape", "monkeypatch"}


def test_a_parameter_named_like_a_builtin_is_fine():
    assert rules_of("def f(input, compile=False):\n    return input if compile else input\n") == set()


@pytest.mark.parametrize("line", ["().__class__.__base__.__subclasses__()", "f.__globals__", "__builtins__",
                                  "torch.__dict__", "getattr(torch, '__dict__')", "getattr(torch, name)",
                                  "import sys; sys._getframe()"])
def test_rejects_dunder_and_frame_escapes(line):
    assert rules_of(line) & {"escape", "import"}


def test_allows_ordinary_dunders():
    assert rules_of("class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        print(type(self).__name__)\n") == set()


@pytest.mark.parametrize("line", ["torch.mean = None", "torch.Tensor.add = lambda *a: 0", "tl.sum = None",
                                  "triton.jit = None", "import torch.nn.functional as F\nF.relu = None",
                                  "T = torch.Tensor\nT.allclose = None", "del torch.mean", "torch.nn.Module.x = 1"])
def test_rejects_monkeypatching_torch_and_triton(line):
    assert "monkeypatch" in rules_of(line)


def test_assigning_into_own_tensors_is_not_monkeypatching():
    assert rules_of("def f(x):\n    out = torch.empty_like(x)\n    out[0] = 1\n    out.data = x\n    return out\n") == set()


@pytest.mark.parametrize("line", ["def f():\n    torch.backends.cudnn.allow_tf32 = True",
                                  "torch.backends.cuda.matmul.allow_tf32 = True",
                                  "import torch.backends.cudnn as cudnn\ndef f():\n    cudnn.benchmark = False",
                                  "torch.backends.cudnn.benchmark = flag", "a = torch.backends.cudnn.benchmark = True",
                                  "class M:\n    torch.backends.cudnn.deterministic = False",
                                  "torch.backends.cudnn.allow_tf32 = 1", "torch.backends.cudnn.enabled = False",
                                  "torch.backends.cudnn.allow_tf32 = torch.backends.cudnn.benchmark = False",
                                  "torch.backends.cudnn.conv.fp32_precision = 'ieee'",
                                  "torch.set_float32_matmul_precision('high')", "torch.set_float32_matmul_precision(p)",
                                  "torch.set_float32_matmul_precision('highest', 'x')",
                                  "f = torch.set_float32_matmul_precision\nf('highest')",
                                  "torch.use_deterministic_algorithms(True)",
                                  "with torch.backends.cudnn.flags(enabled=False):\n    pass"])
def test_rejects_changing_torch_backend_flags(line):
    assert "backend-flags" in rules_of(line)


@pytest.mark.parametrize("line", ["torch.backends.cudnn.benchmark = True",
                                  "import torch.backends.cudnn as cudnn\ncudnn.benchmark = True",
                                  "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                  "        torch.backends.cudnn.benchmark = True"])
def test_turning_cudnns_autotuner_on_is_allowed_the_worker_turns_it_back_off(line):
    """Common in honest answers; the worker restores the default after the import and each ModelNew it builds
    (tests/test_harness.py::test_cudnn_benchmark_is_off_in_forward_and_refused_when_forward_sets_it)."""
    assert rules_of(line) == set()


@pytest.mark.parametrize("line", ["torch.backends.cudnn.allow_tf32 = False", "torch.backends.cuda.matmul.allow_tf32 = False",
                                  "torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False",
                                  "torch.backends.cudnn.deterministic = True",
                                  "torch.set_float32_matmul_precision('highest')"])
def test_tf32_off_and_deterministic_cudnn_are_allowed_the_worker_puts_the_defaults_back(line):
    """Honest answers turn TF32 off (or name the default precision) "to match the fp32 reference": one value per flag,
    the one away from the default or the default itself, so nothing a forward sets can be set back before the flags
    are compared (tests/test_harness.py::test_tf32_off_at_import_is_undone_and_refused_when_forward_sets_it)."""
    assert rules_of(line) == set()


@pytest.mark.parametrize("line", ["torch.backends.cudnn.allow_tf32 = True",
                                  "import torch.backends.cudnn as cudnn\ncudnn.benchmark = False",
                                  "torch.backends.cudnn.deterministic = False", "torch.backends.cudnn.enabled = True",
                                  "torch.backends.cuda.matmul.allow_tf32 = False",
                                  "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True",
                                  "if torch.cuda.is_available():\n    torch.backends.cudnn.allow_tf32 = True"])
def test_a_flag_set_to_its_default_at_import_is_no_change(line):
    """PyTorch's own default, written out at import (nothing runs after it but the harness, which compares the flags):
    allowed. In a def or a class body it is refused (a forward could set a flag away and back around its operators:
    test_rejects_changing_torch_backend_flags), and any other value is refused anywhere."""
    assert rules_of(line) == set()


def test_reading_a_backend_flag_is_fine():
    assert rules_of("tf32 = torch.backends.cudnn.allow_tf32\n") == set()


@pytest.mark.parametrize("line", ["s = torch.cuda.Stream()", "with torch.cuda.stream(s):\n    pass",
                                  "torch.cuda.set_stream(s)", "from torch.cuda import Stream"])
def test_rejects_extra_cuda_streams(line):
    assert "stream" in rules_of(line)


@pytest.mark.parametrize("line", ["torch.load('w.pt')", "torch.save(x, 'w.pt')", "torch.hub.load('a', 'b')",
                                  "from torch.utils.cpp_extension import load_inline",
                                  "torch.ops.load_library('x.so')", "x.numpy().tofile('f')", "torch.compile(m)"])
def test_rejects_file_network_native_code_and_compile(line):
    assert rules_of(line)


def test_rejects_absent_triton_functions_whatever_the_spelling():
    code = "@triton.jit\ndef g(x_ptr):\n    y = tl.gelu(tl.load(x_ptr))\n"
    assert "absent-triton" in rules_of(code)
    assert "absent-triton" in rules_of(code, absent=["gelu"])
    assert "absent-triton" in rules_of(code, absent=["triton.language.gelu"])
    assert rules_of(code, absent=[]) == set()


def test_a_function_the_prompt_calls_absent_but_triton_has_is_allowed():
    """The seed prompt says Triton has no tl.sigmoid or tl.softmax; it has both (since 2.x). The list is the prompt's
    advice: code calling what the installed Triton provides compiles and is honest (was: absent-triton)."""
    import triton.language

    for name in ("sigmoid", "softmax"):
        assert callable(getattr(triton.language, name))
        code = f"@triton.jit\ndef g(x_ptr):\n    y = tl.{name}(tl.load(x_ptr))\n"
        assert rules_of(code, absent=[f"tl.{name}", "tl.gelu"]) == set(), name


def test_rejects_pure_pytorch():
    code = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x.mean()\n"
    assert [v.rule for v in check(code, StageRules(), ABSENT)] == ["no-kernel"]


def test_rejects_a_kernel_that_is_never_launched():
    code = HEADER.replace("k[(1,)](x, out, x.numel(), BLOCK=1024)", "out = x * 2")
    assert "no-kernel" in {v.rule for v in check(code, StageRules(), ABSENT)}


STORE_TWICE = """
@triton.jit
def fused(x_ptr, tmp_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(tmp_ptr + offs, x * 2)
    p = tmp_ptr + offs
    y = tl.load(p)
    tl.store(out_ptr + offs, y)
"""


def test_memory_fusion_names_the_line_of_the_store_it_loads_back():
    [v] = [v for v in check(HEADER + STORE_TWICE, FUSION, ABSENT) if v.rule == "stage-store-then-load"]
    lines = (HEADER + STORE_TWICE).splitlines()
    assert v.line == lines.index("    y = tl.load(p)") + 1
    assert f"line {lines.index('    tl.store(tmp_ptr + offs, x * 2)') + 1}" in v.message


def test_memory_fusion_flags_store_then_load_through_a_local_pointer():
    assert "stage-store-then-load" in rules_of(STORE_TWICE, FUSION)


def test_stage_without_rules_allows_intermediate_stores():
    assert rules_of(STORE_TWICE, StageRules()) == set()


def test_one_output_stored_in_two_branches_is_one_target():
    code = """
    @triton.jit
    def br(x_ptr, out_ptr, EVEN: tl.constexpr):
        offs = tl.arange(0, 16)
        v = tl.load(x_ptr + offs)
        if EVEN:
            tl.store(out_ptr + offs, v)
        else:
            tl.store(out_ptr + offs, v, mask=offs < 8)
    """
    assert rules_of(code, FUSION) == set()


def test_in_place_update_is_not_store_then_load():
    code = """
    @triton.jit
    def inplace(x_ptr, n):
        offs = tl.arange(0, 16)
        v = tl.load(x_ptr + offs)
        tl.store(x_ptr + offs, v * 2)
    """
    assert rules_of(code, FUSION) == set()


def test_violations_carry_line_numbers():
    v = check(HEADER + "torch.mean = None\n", StageRules(), ABSENT)
    assert v[0].line == len((HEADER + "torch.mean = None\n").splitlines())
    assert str(v[0]).startswith(f"line {v[0].line}:")


def test_flags_a_round_trip_through_a_chain_of_aliases_and_the_core_namespace():
    code = """
    @triton.jit
    def chained(x_ptr, tmp, out, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        a = tmp + offs
        b = a
        c = b
        tl.core.store(c, tl.load(x_ptr + offs))
        tl.store(out + offs, tl.load(tmp + offs))
    """
    assert "stage-store-then-load" in rules_of(code, FUSION)


def test_buffer_names_without_ptr_and_split_reduction_partials_are_legal():
    code = """
    @triton.jit
    def split(x, partial, counter, out, n, S: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        tl.store(partial + pid, tl.sum(tl.load(x + offs, mask=offs < n, other=0.0)))
        ticket = tl.atomic_add(counter, 1)
        if ticket == S - 1:
            parts = tl.load(partial + tl.arange(0, S))
            tl.store(out, tl.sum(parts))
    """
    assert rules_of(code, FUSION) == set()


def test_a_loop_carried_pointer_is_not_claimed_to_be_one_address():
    code = """
    @triton.jit
    def walk(x, out, n, BLOCK: tl.constexpr):
        p = out + tl.arange(0, BLOCK)
        for i in range(4):
            tl.store(p, tl.load(x + i))
            p += BLOCK
            v = tl.load(p)
    """
    assert rules_of(code, FUSION) == set()


def test_static_analysis_is_linear_in_a_chain_of_assignments():
    import time

    chain = "\n".join(f"    a{i + 1} = a{i} + a{i} * 2 + (a{i} - 1)" for i in range(400))
    code = f"@triton.jit\ndef deep(x_ptr, out_ptr):\n    a0 = x_ptr\n{chain}\n    tl.store(a400, 1.0)\n    tl.load(a400)\n"
    start = time.monotonic()
    rules = rules_of(code, FUSION)
    assert time.monotonic() - start < 1.0
    assert "stage-store-then-load" in rules


def test_private_reads_of_self_in_a_decorated_method_are_judged_once_per_method():
    """Whether a method's self is its own (its decorators, its scope's bindings) is worked out once per method, not
    per read: 1000 reads of self._x under @torch.no_grad() took over 5 s (the time cap) when each read walked the
    method and the module again."""
    import time

    def code(n: int) -> str:
        body = "\n".join(f"        a{i} = self._x + {i}" for i in range(n))
        return (f"class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._x = 1\n"
                f"    @torch.no_grad()\n    def f(self):\n{body}\n        return a0\n")

    assert rules_of(code(10)) == set()  # imports and caches warm
    start = time.monotonic()
    assert rules_of(code(1000)) == set()
    assert time.monotonic() - start < 2.0


def test_a_pathological_answer_hits_the_time_cap_not_the_agent():
    code = HEADER + "\n".join(f"v{i} = [{', '.join('torch.float32' for _ in range(40))}]" for i in range(200))
    violations = check(code, FUSION, ABSENT, time_cap_s=0.001)
    assert [v.rule for v in violations] == ["size"] and "takes over" in violations[0].message
    assert check(code, FUSION, ABSENT) == []  # the same code within the normal cap: nothing wrong with it


def test_the_time_cap_counts_the_analysis_not_importing_torch_or_a_busy_machine():
    """A fresh process imports torch and triton on its first check (seconds, more under load): not the code's fault."""
    import subprocess
    import sys

    script = (
        "import time\n"
        "from agent.harness.static.policy import check\n"
        "from agent.problems import load_problem, starting_code\n"
        "from agent.stages import absent_triton_functions, get_stage\n"
        "t = time.monotonic()\n"
        "v = check(starting_code(load_problem('gap44')), get_stage('memory-fusion').rules, absent_triton_functions(),"
        " time_cap_s=0.5)\n"
        "print(len(v), round(time.monotonic() - t, 2))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    violations, took_s = out.stdout.split()
    assert violations == "0", out.stderr
    assert float(took_s) > 0.5  # the imports alone took longer than the cap, and did not count


@pytest.mark.parametrize("line", [
    "torch.os.environ", "x = torch.sys.modules", "triton.runtime.jit.os.system('id')", "torch.nn.modules.module.sys",
    "import torch.nn.functional as F\nF.torch.os", "m = torch\nm.os.getcwd()", "from torch import os",
    "import torch.utils", "torch.utils.cpp_extension", "torch.ops.aten.mean(x)", "torch.serialization.load",
    "from torch import serialization", "torch.library.define", "torch._C._get_tracing_state()",
    "torch._dynamo.reset()", "import triton.runtime", "triton.compile(src)", "triton.runtime.jit.JITFunction",
    "triton.runtime.driver.active.utils.launch", "triton.testing.do_bench(f)", "warnings.sys",
])
def test_rejects_modules_reached_through_attributes_of_allowed_ones(line):
    assert rules_of("import warnings\n" + line) & {"import", "escape", "file", "process"}


@pytest.mark.parametrize("line", [
    "def f(m):\n    return m.os", "def f(m):\n    return m.sys.modules", "def f(t):\n    return t.builtins",
    "def f(t):\n    return t._version", "def f(t):\n    return t._base", "y = (lambda q: q._C)(torch)",
    "def f(e):\n    return e.tb_frame.f_globals", "def f(t):\n    return t.numpy().mean()",
    "def f(t):\n    return sum(t.tolist())", "def f(t):\n    return t.untyped_storage()",
])
def test_rejects_escapes_through_objects_it_cannot_resolve(line):
    assert rules_of(line) & {"import", "escape", "host-compute"}


@pytest.mark.parametrize("line", [
    "def f(t, o):\n    o.map_(t, lambda a, b: b)", "def f(t):\n    t.apply_(lambda v: v * 2)",
    "def f(t, a, b):\n    t.map2_(a, b, lambda x, y, z: y + z)",
])
def test_rejects_per_element_python_over_a_tensor(line):
    """Tensor.apply_/map_/map2_ run Python per element with no operator the recorder sees (a copy of the data into
    a buffer nothing links to it); they exist only on the CPU, so no GPU answer needs them."""
    assert "host-compute" in rules_of(line)


@pytest.mark.parametrize("line", [
    "'{0.__init__.__globals__}'.format(k)", "import operator\noperator.attrgetter('x')",
    "type(torch.ones(1)).mean = None", "def f(x):\n    type(x).add = None",
    "@triton.jit\ndef g(a):\n    p = a.to(tl.pointer_type(tl.float32))", "help(torch)", "dir(); input()",
    "import gc", "import inspect", "from os import path", "import importlib.util",
])
def test_rejects_other_escape_routes(line):
    assert rules_of(line)


@pytest.mark.parametrize("line", [
    "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._cache = {}\n"
    "    def forward(self, x):\n        return self._cache.get(x.shape, x)",
    "n_sm = torch.cuda.get_device_properties(0).multi_processor_count",
    "props = triton.runtime.driver.active.utils.get_device_properties(0)",
    "from triton.language.extra import libdevice",
    "@triton.jit\ndef g(a_ptr):\n    v = tl.extra.cuda.libdevice.tanh(tl.load(a_ptr))",
    "def f(p):\n    return p.grad is None",
    "class B(nn.Module):\n    def forward(self, x):\n        return [m for m in self.modules()]",
    "import torch.nn.functional as F\ny = F.relu(torch.ones(2))", "import math\nz = math.sqrt(2.0)",
    "from dataclasses import dataclass\n\n@dataclass\nclass Cfg:\n    block: int = 128",
    "from typing import Optional, Tuple", "t = torch.empty(4)\nz = t.data_ptr() % 16",
    "x = torch.ones(3)\nv = x.sum().item()", "print(f'{triton.__version__} {torch.__version__}')",
    "from functools import lru_cache\n\n@lru_cache(maxsize=None)\ndef cfg(n):\n    return triton.next_power_of_2(n)",
    "k2 = triton.heuristics({'EVEN': lambda a: a['n'] % 2 == 0})", "s = '{:.3f} {name}'.format(1.0, name='x')",
])
def test_allows_what_honest_kernel_modules_do(line):
    assert rules_of(line) == set(), check(HEADER + textwrap.dedent(line), StageRules(), ABSENT)


@pytest.mark.parametrize("line", [
    "e = torch.cuda.Event(enable_timing=True)", "from torch.cuda import Event", "t = torch.Event",
    "def f(a, b):\n    return a.elapsed_time(b)",
    "@triton.jit\ndef g(o):\n    tl.store(o, tl.extra.cuda.globaltimer())",
    "@triton.jit\ndef g(o):\n    tl.store(o, tl.inline_asm_elementwise('mov.u64 $0, %clock64;', '=l', [], dtype=tl.int64, "
    "is_pure=False, pack=1))",
    "S = 'mov.u64 $0, %glob' + 'altimer;'\n@triton.jit\ndef g(o):\n    tl.store(o, tl.inline_asm_elementwise(S, '=l', [], "
    "dtype=tl.int64, is_pure=False, pack=1))",
])
def test_rejects_clocks_a_forward_could_tell_checked_calls_by(line):
    assert "clock" in rules_of(line + "\n")


@pytest.mark.parametrize("line", ["f = tl.inline_asm_elementwise", "f = getattr(tl, 'inline_asm_elementwise')",
                                  "@triton.jit\ndef g(x):\n    return tl.core.inline_asm_elementwise(A, '=r,r', [x], "
                                  "dtype=tl.float32, is_pure=True, pack=1)"])
def test_inline_assembly_reached_any_other_way_than_a_direct_literal_call_is_refused(line):
    assert "clock" in rules_of(line + "\n")


def test_inline_assembly_without_a_clock_and_a_synchronize_are_fine():
    asm = ("@triton.jit\ndef g(x):\n    return tl.inline_asm_elementwise('tanh.approx.f32 $0, $1;', '=r,r', [x], "
           "dtype=tl.float32, is_pure=True, pack=1)\n")
    assert rules_of(asm) == set() and rules_of("torch.cuda.synchronize()\n") == set()

@pytest.mark.parametrize("launch", ["self._kernel[(1,)](x, out, x.numel(), BLOCK=1024)",
                                    "Ops.kernel[(1,)](x, out, x.numel(), BLOCK=1024)"])
def test_a_kernel_kept_on_a_class_and_launched_through_an_attribute_counts_as_launched(launch):
    name = launch.split("[")[0].split(".")[-1]
    code = HEADER.replace("def k(", f"def {name}(").replace("k[(1,)](x, out, x.numel(), BLOCK=1024)", launch)
    assert "no-kernel" not in {v.rule for v in check(code, StageRules(), ABSENT)}
    unlaunched = code.replace(launch, "out = x * 2")
    assert "no-kernel" in {v.rule for v in check(unlaunched, StageRules(), ABSENT)}


def test_exception_classes_may_be_caught():
    assert rules_of("""
        try:
            from triton.language.extra import libdevice
        except (ImportError, ModuleNotFoundError):
            from triton.language.extra.cuda import libdevice
    """) == set()


def test_an_export_list_is_fine_and_other_module_dunders_are_not():
    assert rules_of('__all__ = ["ModelNew"]\n') == set()
    assert "escape" in rules_of("x = __builtins__\n")
    assert "escape" in rules_of("x = __loader__\n")


MAIN_GUARD = '''
if __name__ == "__main__":
    import time
    t0 = time.perf_counter()
    print(triton.testing.do_bench(lambda: None), open("log.txt").read(), time.perf_counter() - t0)
'''


def test_a_main_guarded_self_test_is_not_checked_because_it_never_runs():
    assert rules_of(MAIN_GUARD) == set()
    assert rules_of(MAIN_GUARD.replace('__name__ == "__main__"', '"__main__" == __name__')) == set()


@pytest.mark.parametrize("rebind", ["__name__ = '__main__'\n", "y = (__name__ := '__main__')\n",
                                    "from math import pi as __name__\n",
                                    "def f():\n    global __name__\n    __name__ = 1\n",
                                    "match 1:\n    case __name__:\n        pass\n"])
def test_a_main_guard_is_checked_where_the_code_could_rebind_its_name(rebind):
    assert {"clock", "file"} <= rules_of(rebind + MAIN_GUARD)  # the body is checked: its clock and its file


def test_only_the_exact_main_guard_at_module_level_is_skipped_and_its_else_is_checked():
    assert {"clock", "file"} <= rules_of(MAIN_GUARD.replace('"__main__"', '"__main__" or True'))
    assert {"clock", "file"} <= rules_of("def g():\n" + textwrap.indent(MAIN_GUARD, "    "))
    assert "import" in rules_of(MAIN_GUARD + "else:\n    import sys\n")


def test_version_checks_and_backend_queries_are_fine_but_setting_a_backend_is_not():
    assert rules_of("V = tuple(int(p) for p in triton.__version__.split('.')[:2])\n") == set()
    assert rules_of("A = torch.backends.cudnn.is_available() and torch.backends.cudnn.version()\n") == set()
    assert "backend-flags" in rules_of("torch.backends.cudnn.set_flags(True)\n")
    assert "escape" in rules_of("S = triton.__version__.__class__.__subclasses__()\n")


def test_time_may_be_imported_but_its_clocks_not_read_or_patched():
    assert rules_of("import time\n") == set()  # for a main-guarded self-test
    assert "clock" in rules_of("import time\nT0 = time.perf_counter()\n")
    assert "clock" in rules_of("from time import monotonic_ns\n")
    assert "monkeypatch" in rules_of("import time\ntime.perf_counter = lambda: 0.0\n")


@pytest.mark.parametrize("line", [
    "ok = torch.cuda.current_stream().query()", "s = torch.cuda.default_stream()\nbusy = not s.query()",
    "n = torch.cuda.memory_stats()['allocation.all.allocated']", "a = torch.cuda.memory_allocated()",
    "p = torch.cuda.max_memory_allocated()", "free, total = torch.cuda.mem_get_info()",
    "from torch.cuda import memory_allocated", "cuda = torch.cuda\nu = cuda.utilization()",
    "r = getattr(torch.cuda, 'memory_reserved')()", "def f(c):\n    return c.reset_peak_memory_stats()",
])
def test_rejects_reading_the_harness_or_gpu_state_whatever_the_spelling(line):
    """Recorded calls copy and synchronize around every launch: the allocator's counts and an idle stream tell them
    from the others, where a forward could skip the work."""
    assert "observe" in rules_of(line)


def test_a_layer_named_query_is_not_a_streams_query():
    """Attention's projections are called with their input; the stream's query() takes none."""
    assert rules_of("class A(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.query = torch.nn.Linear(4, 4)\n\n    def forward(self, x):\n"
                    "        return self.query(x)\n") == set()
    assert "observe" in rules_of("def f(s):\n    q = s.query\n    return q()\n")  # passed around


def test_a_softmax_temperature_of_its_own_is_not_the_gpus():
    assert rules_of("class A:\n    def __init__(self, t):\n        self.temperature = t\n\n"
                    "    def f(self, x):\n        return x / self.temperature\n") == set()
    for line in ("t = torch.cuda.temperature()", "def f(c):\n    return c.temperature()",
                 "def f(c):\n    t = c.temperature\n    return t", "class A:\n    def f(self):\n"
                 "        return self.temperature()"):
        assert "observe" in rules_of(line), line


@pytest.mark.parametrize("line", [
    "with warnings.catch_warnings(record=True) as got:\n    pass", "kw = {'record': True}\nc = warnings.catch_warnings(**kw)",
    "def f(w):\n    return w.catch_warnings(record=1)", "def f(w):\n    w.showwarning = print",
    "warnings.showwarning = print", "def f(w):\n    w.formatwarning = str",
])
def test_rejects_reading_back_a_warnings_place_which_names_the_forwards_callers(line):
    assert "escape" in rules_of("import warnings\n" + line)


def test_raising_warnings_at_any_stacklevel_and_silencing_them_are_fine():
    code = "import warnings\nwarnings.warn('slow path', UserWarning, stacklevel=2)\nwarnings.warn('x', UserWarning, 3)\n" \
           "with warnings.catch_warnings():\n    warnings.simplefilter('ignore')\ns = torch.cuda.current_stream()\n" \
           "torch.cuda.synchronize()"
    assert rules_of(code) == set()


@pytest.mark.parametrize("extra, rule", [
    ('import typing\ndef f(a: "torch.cuda.Event(enable_timing=True)") -> None:\n    pass\nH = typing.get_type_hints(f)\n',
     "clock"),
    ('def f() -> "open(\'/etc/passwd\').read()":\n    pass\n', "file"),
    ('x: "list[\'__import__(\\"os\\")\']" = []\n', "escape"),
])
def test_string_annotations_are_checked_as_the_code_they_spell(extra, rule):
    """typing.get_type_hints and singledispatch evaluate string annotations: each is parsed and checked in place,
    strings inside strings too."""
    assert rule in rules_of(extra)


@pytest.mark.parametrize("extra", [
    'import typing\nL = typing.Optional["torch._C"]\ndef f() -> L:\n    pass\nH = typing.get_type_hints(f)\n',
    'from typing import get_type_hints as hints\n',
    'import typing_extensions\nA = typing_extensions.get_annotations(torch, eval_str=True)\n',
    'import typing\nR = typing.ForwardRef("torch._C")\n',
])
def test_typings_string_evaluators_are_refused(extra):
    """A string typing turns into a forward reference outside an annotation (`Optional["torch._C..."]`) is code no
    static check reads: the functions that evaluate them are refused, however imported."""
    assert "exec" in rules_of(extra)


def test_a_helper_the_main_guard_and_a_string_annotation_name_is_checked():
    code = ('def self_check():\n    return torch._C\n'
            'def layout() -> "self_check()":\n    pass\n'
            'if __name__ == "__main__":\n    self_check()\n')
    assert "escape" in rules_of(code)


HIDDEN_KERNEL = """
@triton.jit(repr=lambda _: \'\'\'
def k(x, n):
    pass
\'\'\')
def k(x, n):
    pass
"""


def test_a_kernel_whose_decorators_hold_a_line_triton_would_compile_is_refused():
    """Triton compiles a kernel from its text, from the first line starting `def name(`: a decorator's string."""
    assert "escape" in rules_of(HIDDEN_KERNEL)
    nested = "def make():\n" + textwrap.indent(HIDDEN_KERNEL, "    ") + "    return k\n"
    assert "escape" in rules_of(nested)


def test_a_kernel_with_prose_in_its_decorators_or_a_def_in_its_docstring_stays_allowed():
    honest = ('@triton.autotune(configs=[triton.Config({"B": 64})], key=["n"])\n@triton.jit\n'
              'def k(x, n, B: tl.constexpr):\n    """Like\n    def reference(x): return x\n    """\n    pass\n')
    assert "escape" not in rules_of(honest)


READS_C = "class A:\n    def g(self):\n        return self._C\n"


@pytest.mark.parametrize("use", [
    "q = A.g(torch)",                                            # the method taken from the class
    "def via(k, o):\n    return k.g(o)\nq = via(A, torch)",     # the class handed around
    "q = type(A()).g(torch)",
    "q = A().__class__.g(torch)",
    "q = super(A, A).g(torch)",
    "class B(A):\n    h = A.g\nq = B.h(torch)",
    "A.h = 0\nclass C:\n    def g(self):\n        return self._C\n    h = g\nq = C.h(torch)",
    "class M(A):\n    pass\nq = M.g(torch)",                       # inherited
    "KEEP = []\ndef keep(k):\n    KEEP.append(k)\n    return k\n@keep\nclass D(A):\n    pass\nq = KEEP[0].g(torch)",
    "class E(A):\n    @classmethod\n    def me(cls):\n        return cls\nq = E.me().g(torch)",
    "KEEP = []\nclass Grab:\n    def __set_name__(self, owner, name):\n        KEEP.append(owner)\n"
    "class F(A):\n    d = Grab()\nq = KEEP[0].g(torch)",                # a descriptor is handed its owner
])
def test_a_method_reading_private_attributes_of_self_is_not_called_on_another_object(use):
    """Python binds `self` to whatever a method is called with: `A.g(torch)` reads torch._C."""
    assert "escape" in rules_of(READS_C + use + "\n")


def test_self_is_the_objects_own_only_in_a_method():
    assert "escape" in rules_of("def g(self):\n    return self._C\nq = g(torch)\n")


@pytest.mark.parametrize("decorator", [
    "@staticmethod",                                                         # no binding: self is any argument
    "@unbind",                                                               # the candidate's own, returning one
    "@property.fget",
    "@g.setter",                                                             # g is no property of the class
])
def test_self_is_not_the_objects_own_in_a_method_whose_decorator_may_unbind_it(decorator):
    """A staticmethod's first parameter, named self or not, is whatever the caller passes: `A.g(torch)` is allowed
    for static methods, so it would read torch._C."""
    code = ("def unbind(f):\n    return staticmethod(f)\ndef g(x):\n    return x\n"
            f"class A:\n    {decorator}\n    def g(self):\n        return self._C\nq = A.g(torch)\n")
    assert "escape" in rules_of(code)


def test_library_decorators_that_keep_a_method_bound_keep_self_its_own():
    code = ("import functools\nimport abc\nfrom functools import cached_property\n"
            "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._b = 1\n"
            "    @torch.no_grad()\n    def forward(self, x):\n        return self._b\n"
            "    @property\n    def b(self):\n        return self._b\n"
            "    @b.setter\n    def b(self, v):\n        self._b = v\n"
            "    @functools.cached_property\n    def c(self):\n        return self._b\n"
            "    @cached_property\n    def d(self):\n        return self._b\n"
            "    @classmethod\n    def make(cls):\n        return cls()\n"
            "    @torch.jit.ignore\n    def e(self):\n        return self._b\n")
    assert rules_of(code) == set()


def test_honest_private_attributes_and_uses_of_a_class_stay_allowed():
    code = ("class A(nn.Module):\n    _k = 3\n    def __init__(self):\n        super(A, self).__init__()\n"
            "        self._c = 1\n    def g(self) -> 'A':\n        return self._c + self._k\n"
            "    @staticmethod\n    def s(x):\n        return x\n"
            "class B(A):\n    def g(self) -> 'A':\n        return A.g(self) + 1\n"
            "a = B()\nv = a.g()\nok = isinstance(a, (A, B))\ny = A.s(2) + A._k\n"
            "import dataclasses\n@dataclasses.dataclass\nclass P(A):\n    n: int = 0\n")
    assert rules_of(code) == set()


@pytest.mark.parametrize("pattern", ["object(_C=c)", "object(os=o)", "object(f_back=f)", "object(tolist=t)"])
def test_a_class_patterns_keywords_are_attribute_reads(pattern):
    """`case object(_C=c)` reads the subject's attribute by name, which no attribute node shows."""
    assert rules_of(f"match torch:\n    case {pattern}:\n        pass\n") & {"escape", "import", "host-compute"}


def test_honest_class_patterns_stay_allowed():
    assert rules_of("match (1, 2):\n    case tuple() if True:\n        pass\n    case object(real=r):\n"
                    "        pass\n") == set()


def test_honest_string_annotations_and_prose_in_them_stay_allowed():
    assert rules_of('def f(x: "torch.Tensor", n: "int") -> "torch.Tensor":\n    return x\n') == set()
    assert rules_of('import typing\nY: typing.Annotated[int, "shape (N, C) after the pool"] = 1\n') == set()

@pytest.mark.parametrize("line", [
    "fetch = getattr\nc = fetch(torch, '_C')",
    "import functools\nc = functools.reduce(getattr, ['_C'], torch)",
    "c = list(map(getattr, [torch], ['_C']))",
    "def f(o, n, g=getattr):\n    return g(o, n)",
    "c = getattr(*[torch, '_C'])",
])
def test_getattr_is_only_called_by_name_with_a_literal(line):
    assert "escape" in rules_of(line)


def test_getattr_called_directly_with_a_literal_stays_allowed():
    assert rules_of("y = getattr(torch, 'float32', None)\nh = hasattr(torch, 'float16')") == set()


@pytest.mark.parametrize("line", [
    "import functools\nfunctools.update_wrapper(torch.empty(2), k, assigned=('untyped' + '_storage',))",
    "from functools import update_wrapper\nupdate_wrapper(k, object())",
    "import dataclasses\nSlot = dataclasses.make_dataclass('Slot', [('_' + 'src', str)])",
    "import functools\nfunctools.wraps(k, assigned=('_src',))(k)",
    "import functools\nfunctools.wraps(k, (), ('__dict__',))(k)",
    "import functools\nfunctools.wraps(object())(k)",
    "import functools\n@functools.wraps(object())\n@triton.jit\ndef k2(x):\n    pass\n",
])
def test_attributes_set_by_names_held_in_strings_are_refused(line):
    """As setattr: a tensor's own namespace shadows its methods, a kernel object's holds the text Triton compiles."""
    assert "escape" in rules_of(line)


@pytest.mark.parametrize("line", [
    "with torch.ExcludeDispatchKeyGuard(torch.DispatchKeySet(torch.DispatchKey.Python)):\n    y = torch.ones(2)",
    "from torch import DispatchKeySet",
    "y = torch.ops.aten.mean.default.redispatch(None, torch.ones(2))",
    "f = torch.ops.aten.mean.default.py_impl",
])
def test_the_dispatchers_controls_are_refused(line):
    """Operators run below the Python dispatch key pass the recorder unseen."""
    assert "escape" in rules_of(line)


def test_functools_wraps_as_a_plain_decorator_stays_allowed():
    assert rules_of("import functools\ndef guard(fn):\n    @functools.wraps(fn)\n    def inner(*a):\n"
                    "        return fn(*a)\n    return inner\n") == set()


@pytest.mark.parametrize("modulus", ["18446744073709551616", "(1 << 64)", "3", "1024", "4096", "0"])
def test_an_address_modulo_anything_but_a_small_power_of_two_is_the_address(modulus):
    assert "escape" in rules_of(f"t = torch.empty(4)\nz = t.data_ptr() % {modulus}")


@pytest.mark.parametrize("modulus", ["16", "128", "512"])
def test_an_address_modulo_an_alignment_is_fine(modulus):
    assert rules_of(f"t = torch.empty(4)\nz = t.data_ptr() % {modulus} == 0") == set()


@pytest.mark.parametrize("line", [
    "class P:\n    data_ptr = lambda self: 0",
    "class P:\n    data_ptr: object = property(lambda self: (lambda: 0))",
    "P = type('P', (), {'data_ptr': lambda self: 0})",
    "P = type('P', (torch.Tensor,), {})",
    "P = type(torch.Tensor)('P', (torch.nn.Parameter,), {})",
])
def test_no_pointer_like_class_is_built_past_the_class_body_checks(line):
    assert "escape" in rules_of(line)


def test_type_of_one_object_stays_allowed():
    assert rules_of("t = torch.empty(4)\nname = type(t).__name__\nok = isinstance(t, type(t))") == set()


@pytest.mark.parametrize("line", [
    "h = torch.empty(4, pin_memory=True)", "h = torch.empty(4).pin_memory()", "p = torch.empty(4).is_pinned()",
    "free, total = torch.cuda.cudart().cudaMemGetInfo(0)", "from torch.cuda import cudart",
])
def test_rejects_what_lets_the_host_watch_the_gpus_progress(line):
    assert "observe" in rules_of(line)


def test_pin_memory_false_is_the_default_and_fine():
    assert rules_of("h = torch.empty(4, pin_memory=False)") == set()


@pytest.mark.parametrize("line", [
    "def f(x, y):\n    k[(1,)](x, y, 4, BLOCK=4, launch_pdl=True)",
    "from triton.language.extra.cuda import gdc_wait",
    "f = tl.extra.cuda.gdc_launch_dependents",
])
def test_rejects_kernels_that_overlap_and_so_can_signal_each_other(line):
    assert "stream" in rules_of(line)


@pytest.mark.parametrize("line", [
    "h = type(torch.cuda.current_stream())().cuda_stream",
    "s = torch.cuda.get_stream_from_external(0)",
])
def test_rejects_a_raw_stream_handle_for_launches_past_the_timed_stream(line):
    assert "stream" in rules_of(line)


def test_self_read_in_a_closure_inside_a_method_is_the_methods_own():
    """A hook lambda or a nested helper reads the enclosing method's self (KernelBench #51's refold hook)."""
    code = ("class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._b = 1\n"
            "        self.register_load_state_dict_post_hook(lambda *_: self._fold())\n"
            "        def helper(k):\n            return self._b + k\n        self.v = helper(2)\n"
            "    def _fold(self):\n        return self._b\n")
    assert rules_of(code) == set()


@pytest.mark.parametrize("inner", [
    "q = (lambda self: self._C)(torch)",                 # the lambda binds its own self
    "def inner(self):\n            return self._C\n        q = inner(torch)",
    "self = torch\n        q = self._C",                  # the method rebinds it
    "def inner():\n            self = torch\n            return self._C\n        q = inner()",
    "for self in [torch]:\n            q = self._C",
])
def test_a_self_bound_again_inside_a_method_is_not_its_own(inner):
    code = f"class A(nn.Module):\n    def g(self):\n        {inner}\n        return q\n"
    assert "escape" in rules_of(code)


def test_parametrize_is_reachable_by_its_listed_paths_only():
    """torch.nn.utils.parametrize re-lays a weight out through a module of the answer's own on each read (PyTorch
    over weights, not the data): register/remove/is_parametrized/cached, however imported (was: import). The rest of
    the module and of torch.nn.utils stays refused."""
    for spelled in ("import torch.nn.utils.parametrize as P\nP.register_parametrization(m, 'weight', f)\n",
                    "from torch.nn.utils import parametrize\nparametrize.register_parametrization(m, 'weight', f)\n",
                    "from torch.nn.utils.parametrize import register_parametrization, cached\n",
                    "import torch\ntorch.nn.utils.parametrize.remove_parametrizations(m, 'weight')\n"):
        assert rules_of(spelled) == set(), spelled
    for refused in ("import torch.nn.utils.parametrize as P\nP.copyreg\n",
                    "import torch.nn.utils.parametrize as P\nP._cache\n",
                    "import torch.nn.utils.parametrize as P\nP.transfer_parametrizations_and_params(a, b)\n",
                    "from torch.nn.utils.parametrize import deepcopy\n",
                    "import torch.nn.utils\n", "from torch.nn.utils import rnn\n",
                    "import torch\ntorch.nn.utils.clip_grad_norm_(p, 1.0)\n"):
        assert rules_of(refused), refused


@pytest.mark.parametrize("line", ["class M(nn.Module):\n    def __init__(self, w):\n        super().__init__()\n"
                                  "        fan_in, _ = nn.init._calculate_fan_in_and_fan_out(w)",
                                  "from torch.nn.init import _calculate_correct_fan\nfan = _calculate_correct_fan(w, 'fan_in')",
                                  "from torch.nn import init\nfan = init._calculate_fan_in_and_fan_out(w)",
                                  "from torch.nn.modules.utils import _pair, _single, _triple\nk = _pair(3)",
                                  "k = torch.nn.modules.utils._triple(3)"])
def test_listed_private_helpers_that_compute_from_their_arguments_are_allowed(line):
    """nn.Linear's own init, copied by LLMs (11 % of one public set of real answers), and the tuple helpers."""
    assert rules_of(line) == set()


@pytest.mark.parametrize("line", ["torch._C._set_cudnn_allow_tf32(False)",
                                  "from torch.nn.modules.utils import _reverse_repeat_tuple",
                                  "g = nn.init._calculate_fan_in_and_fan_out.__globals__",
                                  "g = nn.init._calculate_fan_in_and_fan_out._x",
                                  "nn.init._no_grad_uniform_(w, 0, 1)", "from torch.nn.modules import conv"])
def test_private_paths_not_listed_stay_refused(line):
    assert rules_of(line) & {"escape", "import"}


@pytest.mark.parametrize("line", ["import triton.testing\nif __name__ == '__main__':\n    triton.testing.do_bench(f)",
                                  "import triton.testing as tt\nif __name__ == '__main__':\n    tt.do_bench(f)",
                                  "from triton.testing import do_bench\nif __name__ == '__main__':\n    do_bench(f)",
                                  "from triton import testing\nif __name__ == '__main__':\n    testing.do_bench(f)"])
def test_triton_testing_may_be_imported_for_the_main_guarded_benchmark(line):
    assert rules_of(line) == set()


@pytest.mark.parametrize("line", ["import triton.testing\nms = triton.testing.do_bench(f)",
                                  "import triton.testing as tt\ndef g():\n    return tt.do_bench(f)",
                                  "import triton.testing as tt\nbench = tt", "import triton.testing as tt\nh(tt)",
                                  "from triton.testing import do_bench\nms = do_bench(f)",
                                  "from triton.testing import do_bench as b\nx = [b]",
                                  "import triton.testing as tt\nb = getattr(tt, 'do_bench')",
                                  "import triton.testing\nx = triton.testing.os"])
def test_triton_testing_used_outside_the_main_guard_is_refused(line):
    assert "escape" in rules_of(line)


def test_a_load_inside_a_store_runs_before_it():
    """Python evaluates a call's arguments first: `tl.store(p, tl.load(p) * s)` loads, then stores (in place), as
    its two-statement spelling does; a load of what an earlier statement stored is still a round trip."""
    one_line = """
        @triton.jit
        def scale(p, s, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(p + offs, tl.load(p + offs, mask=offs < n) * s, mask=offs < n)
        """
    assert rules_of(one_line, FUSION) == set()
    assert rules_of(one_line.replace("tl.store(p + offs, tl", "tl.store(p + offs, s); tl.store(p + offs, tl"),
                    FUSION) == {"stage-store-then-load"}
    later = """
        @triton.jit
        def scale(p, s, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            if n > 0:
                tl.store(p + offs, s)
            v = tl.load(p + offs)
        """
    assert rules_of(later, FUSION) == {"stage-store-then-load"}


OWN_LAYERS = """
class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 8, num_layers=2)
        for i in range(2):
            self.add_module(f"proj_{i}", nn.Linear(8, 8))

    def weights(self, x):
        return [{line} for layer in range(2)]
"""


@pytest.mark.parametrize("line", ['getattr(self.rnn, f"weight_ih_l{layer}")', 'getattr(self, f"proj_{layer}")',
                                  'getattr(self.rnn, f"bias_hh_l{layer}_reverse", None)'])
def test_getattr_of_an_own_layers_name_computed_after_a_public_prefix_is_allowed(line):
    """nn.RNN's per-layer parameters and an answer's own numbered layers: only what the answer's class set."""
    assert rules_of(OWN_LAYERS.replace("{line}", line)) == set()


HANDED_LAYER = """
def weights(lstm, layers, suffix=""):
    return [{line} for layer in range(layers)]
"""


@pytest.mark.parametrize("line", ['getattr(lstm, f"weight_ih_l{layer}{suffix}")',
                                  'getattr(lstm, "bias_hh_l" + str(layer))',
                                  'getattr(lstm, "weight_hh_l" + str(layer) + suffix)'])
def test_getattr_of_a_handed_layers_name_no_reachable_attribute_starts_with_is_allowed(line):
    """LLMKernel's RNN answers: a helper handed the nn.LSTM reads its per-layer weights. No module, tensor, Triton
    kernel or builtin an answer can reach has an attribute starting `weight_ih_l`: only nn.RNN's own names do."""
    assert rules_of(HANDED_LAYER.replace("{line}", line)) == set()


@pytest.mark.parametrize("line", [
    'getattr(self, f"{layer}")',                  # no literal start: anything
    'getattr(self, f"_{layer}")',                 # private, dunders
    'getattr(self, f"register{layer}")',          # nn.Module's own API (register_forward_hook, ...)
    'getattr(self, f"load{layer}")',              # load_state_dict
    'getattr(torch, f"weight{layer}")',           # not the answer's own module
    'getattr(self._modules, f"weight{layer}")',   # a private link in the chain
    'getattr(x, f"weight{layer}")',               # not self, and torch has weight_norm
    'getattr(torch, "lo" + str(layer))',          # torch.load
    'getattr(x, f"ops{layer}")',                  # torch.ops
    'getattr(x, f"cud{layer}")',                  # torch.cuda, Tensor.cuda
    'getattr(x, "untyped" + str(layer))',         # Tensor.untyped_storage
    'getattr(x, f"run{layer}")',                  # a Triton kernel's run
])
def test_getattr_with_a_computed_name_that_could_reach_beyond_the_answers_own_is_refused(line):
    assert "escape" in rules_of(OWN_LAYERS.replace("{line}", line).replace("def weights(self, x)",
                                                                             "def weights(self, x=None)"))


@pytest.mark.parametrize("code", [
    "import torch.utils.checkpoint as cp\ndef f(fn, x):\n    return cp.checkpoint(fn, x, use_reentrant=False)",
    "from torch.utils.checkpoint import checkpoint\ndef f(fn, x):\n    return checkpoint(fn, x)",
    "import random\ndef seed():\n    return random.randint(0, 2**31 - 1)",
])
def test_real_answers_imports_that_compute_nothing_beyond_their_arguments_are_allowed(code):
    """LLMKernel's DenseNet201/SwinV2 (activation checkpointing) and a dropout seed drawn from `random`."""
    assert rules_of(code) == set()


@pytest.mark.parametrize("code", [
    "import torch.utils.checkpoint as cp\ndef f(x):\n    return g(cp)",                   # the module as a value
    "import torch.utils.checkpoint as cp\ndef f(x):\n    return cp.CheckpointFunction",   # not a listed path
    "import random\ndef f():\n    return random.SystemRandom()",                          # os.urandom underneath
    "import random\ndef f():\n    return random._os",                                     # private: the os module
    "import torch.utils.data\ndef f():\n    return torch.utils.data.DataLoader",           # the rest of torch.utils
])
def test_the_rest_of_those_modules_stays_refused(code):
    assert rules_of(code) & {"import", "escape"}


def test_capping_the_processs_gpu_memory_is_refused():
    assert rules_of("torch.cuda.set_per_process_memory_fraction(0.5)\n") == {"process"}
