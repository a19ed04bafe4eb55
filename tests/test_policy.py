"""agent.harness.policy: static rules on the candidate's AST, checked before anything runs."""

from __future__ import annotations

import textwrap

import pytest

from agent.harness.policy import check, kernel_names
from agent.problems import load_problem, starting_code
from agent.schema import StageRules

FUSION = StageRules(max_stores_per_kernel=1, forbid_store_then_load=True)
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


@pytest.mark.parametrize("line", ["import os", "import subprocess", "import socket", "import ctypes", "import importlib",
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


@pytest.mark.parametrize("line", ["torch.backends.cudnn.allow_tf32 = False", "torch.backends.cuda.matmul.allow_tf32 = True",
                                  "import torch.backends.cudnn as cudnn\ncudnn.benchmark = True",
                                  "torch.set_float32_matmul_precision('high')", "torch.use_deterministic_algorithms(True)",
                                  "with torch.backends.cudnn.flags(enabled=False):\n    pass"])
def test_rejects_changing_torch_backend_flags(line):
    assert "backend-flags" in rules_of(line)


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
    code = "@triton.jit\ndef g(x_ptr):\n    y = tl.sigmoid(tl.load(x_ptr))\n"
    assert "absent-triton" in rules_of(code)
    assert "absent-triton" in rules_of(code, absent=["sigmoid"])
    assert "absent-triton" in rules_of(code, absent=["triton.language.sigmoid"])
    assert rules_of(code, absent=[]) == set()


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


def test_memory_fusion_counts_store_targets_per_kernel():
    violations = [v for v in check(HEADER + STORE_TWICE, FUSION, ABSENT) if v.rule == "stage-stores"]
    assert len(violations) == 1 and violations[0].line == (HEADER + STORE_TWICE).splitlines().index("    tl.store(tmp_ptr + offs, x * 2)") + 1
    assert "tmp_ptr" in violations[0].message


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
