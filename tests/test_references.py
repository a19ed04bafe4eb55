"""Problems whose own reference is hard to judge against never crash the judge, through the real `agent eval` in CPU
mode: a truth with NaN in it (KLDivLoss of a log of a negative), a truth past fp32's range (cumprod on inputs of mean
5), an eager Model that overflows where the fp64 truth does not, sizes written as arithmetic (`batch_size = 64 * 2`),
and a forward that draws random numbers (one line: it cannot be judged)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

KLDIV = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.nn.functional.kl_div(torch.log(predictions), targets, reduction="batchmean")


batch_size = 8192 * 2
input_shape = (256,)


def get_inputs():
    scale = torch.rand(())
    return [(torch.rand(batch_size, *input_shape) * scale).softmax(dim=-1),
            torch.rand(batch_size, *input_shape).softmax(dim=-1)]


def get_init_inputs():
    return []
'''

KLDIV_ANSWER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kl_rows_kernel(p_ptr, t_ptr, out_ptr, n, rows, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(0, n, BLOCK):
        offs = s + tl.arange(0, BLOCK)
        m = offs < n
        p = tl.load(p_ptr + row * n + offs, mask=m, other=1.0)
        t = tl.load(t_ptr + row * n + offs, mask=m, other=1.0)
        acc += tl.where(m, t * (LOGS), 0.0)
    tl.atomic_add(out_ptr, tl.sum(acc, axis=0) / rows)


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        p, t = predictions.contiguous(), targets.contiguous()
        rows, n = p.shape
        out = torch.zeros((), device=p.device, dtype=p.dtype)
        kl_rows_kernel[(rows,)](p, t, out, n, rows, BLOCK=128)
        return out
'''

CUMPROD = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumprod(x, dim=self.dim)


batch_size = 64 * 2
input_shape = (1000,)
dim = 1


def get_inputs():
    return [torch.rand(batch_size, *input_shape)]


def get_init_inputs():
    return [dim]
'''

CUMPROD_ANSWER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumprod_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=m, other=1.0)
    tl.store(out_ptr + row * n + offs, tl.cumprod(x, axis=0) * FACTOR, mask=m)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        rows, n = x.shape
        out = torch.empty_like(x)
        cumprod_kernel[(rows,)](x, out, n, BLOCK=triton.next_power_of_2(n))
        return out
'''

OVERFLOW = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Scales up, then down: fp32 overflows in between, the fp64 truth does not (and fits fp32)."""

    def forward(self, x):
        return x * 1e30 * 1e30 / 1e30


batch_size = 4
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

SCALE_ANSWER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    y = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, BODY, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scale_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
        return out
'''

RANDOM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * torch.rand_like(x)


batch_size = 4
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''


def judge(tmp_path: Path, problem: str, answer: str, name: str) -> subprocess.CompletedProcess:
    p, a = tmp_path / f"{name}.py", tmp_path / f"{name}_answer.py"
    p.write_text(problem)
    a.write_text(answer)
    return subprocess.run([sys.executable, "-m", "agent", "eval", str(a), "--problem", str(p), "--stage",
                           "correctness", "--device", "cpu", "--no-timing", "--json"], capture_output=True, text=True,
                          timeout=600)


def verdict(out: subprocess.CompletedProcess) -> dict:
    assert out.stdout.strip() and "Traceback" not in out.stderr, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_a_truth_with_nan_is_judged_nan_for_nan_and_a_number_there_is_wrong(tmp_path):
    """KLDivLoss on N(0, 1) inputs: log of a negative, so the truth and eager are NaN. The reference failed ("exit
    status 0": its eager error of NaN was written as null); now the honest answer is correct, NaN where the truth is
    NaN, and one that clamps the log to a number there is told what it got."""
    honest = verdict(judge(tmp_path, KLDIV, KLDIV_ANSWER.replace("LOGS", "tl.log(t) - tl.log(p)"), "kldiv"))
    assert honest["verdict"] == "correct", honest["message"]
    assert [c["shapes"] for c in honest["checks"]][0] == [[2, 256], [2, 256]]  # batch_size = 8192 * 2, reduced
    assert {c["distribution"] for c in honest["checks"]} == {"problem", "randn", "offset", "randn*100"}
    clamp = "tl.log(tl.maximum(t, 1e-30)) - tl.log(tl.maximum(p, 1e-30))"  # the same where inputs are probabilities
    clamped = verdict(judge(tmp_path, KLDIV, KLDIV_ANSWER.replace("LOGS", clamp), "kldiv"))
    assert clamped["verdict"] == "incorrect"
    assert "expected nan" in clamped["message"] and "randn inputs" in clamped["message"]
    assert all(c["passed"] for c in clamped["checks"] if c["distribution"] == "problem")


def test_a_truth_past_fp32s_range_is_inf_for_any_fp32_answer_and_a_wrong_one_still_fails(tmp_path):
    """cumprod on inputs of mean 5 overflows fp32 in ~55 steps, fp64 in ~440: eager's error was inf, written as null
    (the reference failed). Now the truth past fp32's range is fp32's inf, eager's error is its rounding, and the
    tolerance stays 1e-4."""
    honest = verdict(judge(tmp_path, CUMPROD, CUMPROD_ANSWER.replace("FACTOR", "1.0"), "cumprod"))
    assert honest["verdict"] == "correct", honest["message"]
    offset = [c for c in honest["checks"] if c["distribution"] == "offset"]
    assert offset and all(c["eager_error"] < 1e-5 and c["tolerance"] == 1e-4 for c in offset)
    off = verdict(judge(tmp_path, CUMPROD, CUMPROD_ANSWER.replace("FACTOR", "1.001"), "cumprod"))
    assert off["verdict"] == "incorrect" and "> tolerance 0.0001" in off["message"]


def test_where_eager_overflows_and_the_truth_does_not_the_tolerance_is_the_floor(tmp_path):
    """Eager's error is inf there: the tolerance is the floor (finite), an answer that computes the output is
    correct, and one that overflows as eager does is told that the problem's own Model does too."""
    right = verdict(judge(tmp_path, OVERFLOW, SCALE_ANSWER.replace("BODY", "y * 1e30"), "overflow"))
    assert right["verdict"] == "correct", right["message"]
    assert all(c["eager_error"] is None or c["eager_error"] == float("inf") for c in right["checks"])
    assert {c["tolerance"] for c in right["checks"]} == {1e-4}
    eager_way = verdict(judge(tmp_path, OVERFLOW, SCALE_ANSWER.replace("BODY", "y * 1e30 * 1e30 / 1e30"),
                              "overflow"))
    assert eager_way["verdict"] == "incorrect"
    assert "contains Inf" in eager_way["message"] and "non-finite there in fp32 too" in eager_way["message"]


def test_a_forward_that_draws_random_numbers_cannot_be_judged_and_says_so_in_one_line(tmp_path):
    out = judge(tmp_path, RANDOM, SCALE_ANSWER.replace("BODY", "y * 0.5"), "random")
    assert out.returncode == 1 and not out.stdout.strip() and "Traceback" not in out.stderr, out.stderr[-2000:]
    [line] = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert line.startswith("error: the reference for problem random failed")
    assert "two calls on the same inputs differ by" in line and "torch.rand" in line
    assert "incorrect" not in line and "ModelNew" not in line and "candidate" not in line  # never the answer's fault
