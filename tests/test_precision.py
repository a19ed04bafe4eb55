"""--precision: the numerics a candidate is held to. fp32 (the default): max(1e-4, 4x eager's own error vs the fp64
truth). tf32: a floor of 2e-3, for answers with TF32 products (as cuDNN's convolutions and torch.compile's
channels-last ones give under PyTorch's defaults); a bf16-sized error stays refused. Judged by the real harness
through `agent eval` in CPU mode: an answer whose output is off by a relative 5e-4 (TF32's unit roundoff) or 5e-3."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

from agent.catalog import find_gpu  # noqa: E402
from agent.harness.settings import settings, tolerance, widened  # noqa: E402
from agent.offline import Variant, recognise, render  # noqa: E402
from agent.problems import load_problem  # noqa: E402

FP32_FLOOR = settings().validation.tolerance_floor
TF32_FLOOR = settings().validation.tf32_tolerance_floor


def test_tf32_raises_the_floor_and_keeps_the_problems_own_scale():
    assert tolerance(0.0) == FP32_FLOOR == 1e-4 and tolerance(0.0, "tf32") == TF32_FLOOR == 2e-3
    assert tolerance(1e-3) == tolerance(1e-3, "tf32") == 4e-3  # a problem whose eager is already that far off
    assert widened(1e-4, "fp32") == 1e-4 and widened(1e-4, "tf32") == widened(2e-3, "tf32") == 2e-3


def off_by(tmp_path, factor: float) -> str:
    """gap44's offline row kernel with its output scaled by `factor`: a relative error of factor - 1."""
    code = render(recognise(load_problem("gap44")), Variant(family="row", block=1024, warps=4, stages=1),
                  find_gpu("h100"))
    store = "tl.store(out_ptr + row, r)"
    assert store in code
    path = tmp_path / f"off_{factor}.py"
    path.write_text(code.replace(store, f"tl.store(out_ptr + row, r * {factor!r})"))
    return str(path)


def evaluate(path: str, precision: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "agent", "eval", path, "--problem", "gap44", "--device", "cpu",
                          "--no-timing", "--json", "--precision", precision], capture_output=True, text=True,
                         timeout=600)
    assert out.stdout.strip(), out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_tf32_sized_error_passes_only_under_tf32_and_a_bf16_sized_one_never(tmp_path):
    tf32_sized, bf16_sized = off_by(tmp_path, 1.0005), off_by(tmp_path, 1.005)
    fp32 = evaluate(tf32_sized, "fp32")
    assert fp32["verdict"] == "incorrect" and "> tolerance 0.0001" in fp32["message"]
    # an error of TF32's size is named as tl.dot's only where the answer has a default-precision tl.dot (this one
    # has none: tests/candidates/tf32_dot_at_default_precision.py has one, and its message names it)
    assert "TF32's size" not in fp32["message"]
    tf32 = evaluate(tf32_sized, "tf32")
    assert tf32["verdict"] == "correct" and "(tolerance 0.002)" in tf32["message"]
    far = evaluate(bf16_sized, "tf32")
    assert far["verdict"] == "incorrect" and "> tolerance 0.002" in far["message"] and "--precision tf32" in far["message"]
    assert "TF32's size" not in far["message"]  # no hint where TF32 would not explain it
    bf16_fp32 = evaluate(bf16_sized, "fp32")
    assert bf16_fp32["verdict"] == "incorrect" and "TF32's size" not in bf16_fp32["message"]


def test_the_prompt_says_tf32_only_when_the_run_admits_it():
    from agent.catalog import find_gpu as gpu
    from agent.prompts import PromptInput, render as render_prompt
    from agent.stages import get_stage

    inp = PromptInput(stage=get_stage("memory-fusion"), gpu=gpu("h100"), code="x = 1\n")
    assert "[NUMERICS]" not in render_prompt(inp)
    tf32 = render_prompt(inp.model_copy(update={"precision": "tf32"}))
    assert "[NUMERICS]" in tf32 and "relative error of 0.002" in tf32


def test_a_resumed_run_keeps_its_precision():
    import pytest

    from agent.errors import UserError
    from agent.runconfig import RunConfig, resumed, run_flags

    assert not next(f for f in run_flags() if f.field == "precision").flag.resumable
    with pytest.raises(UserError, match="--precision tf32: run r1 was started with fp32"):
        resumed(RunConfig(precision="fp32"), {"precision": "tf32"}, "r1")  # what the run measured with is kept


def test_the_tolerance_is_the_sizes_not_one_draws():
    """KernelBench #23's output is numerically zero (the mean of a group norm's output): eager's own relative error is
    rounding noise, 2e3 on one draw and less on another; an answer as noisy as eager must not fail on the quiet draw.
    A well-conditioned size keeps its own, tight tolerance."""
    import torch

    from agent.harness.job import TrialRecord
    from agent.harness.judge.validate import Reference, compare

    def trial(i: int, size: str, eager: float) -> TrialRecord:
        return TrialRecord(id=i, size=size, distribution="randn", buffer="fresh", input_shapes=[[2]],
                           output_shapes=[[2]], output_dtypes=["float32"], eager_error=eager)

    truth = [torch.tensor([1e-12, -1e-12], dtype=torch.float64)]
    ref = Reference(trials=[trial(0, "zero", 2e3), trial(1, "zero", 5e2), trial(2, "plain", 1e-7)],
                    truths=[truth, truth, [torch.tensor([1.0, 2.0], dtype=torch.float64)]])
    noisy = [torch.tensor([3e-9, -1e-9])]  # 3e3 relative: under 4 x 2e3, over 4 x 5e2
    ok = compare(ref, ref.trials[:2], [noisy, noisy], [])
    assert ok.passed and {c.tolerance for c in ok.checks} == {8e3}
    off = compare(ref, ref.trials[2:], [[torch.tensor([1.0, 2.001])]], [])
    assert not off.passed and off.checks[0].tolerance == 1e-4  # 5e-4 off: the zero size's noise does not leak here


def test_sizes_where_the_output_is_numerically_zero_share_the_worst_noise():
    """KernelBench #23 between two runs of one seed: the one-draw cpu-wide size's eager error was 834 in one, an honest
    answer's 2.5e3; the other sizes' eager errors there were 2.4e4. Where eager has no correct digit (relative error
    > 1) every such size takes the worst noise of any; a size with a correct digit keeps its own tolerance."""
    import torch

    from agent.harness.job import TrialRecord
    from agent.harness.judge.validate import Reference, compare

    def trial(i: int, size: str, eager: float) -> TrialRecord:
        return TrialRecord(id=i, size=size, distribution="randn", buffer="fresh", input_shapes=[[2]],
                           output_shapes=[[2]], output_dtypes=["float32"], eager_error=eager)

    tiny = [torch.tensor([1e-12, -1e-12], dtype=torch.float64)]
    plain = [torch.tensor([1.0, 2.0], dtype=torch.float64)]
    ref = Reference(trials=[trial(0, "cpu", 2.4e4), trial(1, "wide", 834.0), trial(2, "plain", 1e-7)],
                    truths=[tiny, tiny, plain])
    noisy = [torch.tensor([2.5e-9, -1e-9])]  # 2.5e3 relative: over 4 x 834, under 4 x 2.4e4
    ok = compare(ref, ref.trials[:2], [noisy, noisy], [])
    assert ok.passed and {c.tolerance for c in ok.checks} == {9.6e4}
    off = compare(ref, ref.trials[2:], [[torch.tensor([1.0, 2.001])]], [])
    assert not off.passed and off.checks[0].tolerance == 1e-4


def test_each_output_has_its_own_tolerance():
    """A Model returning a numerically-zero output beside a normal one: eager's noise on the first (relative 1e3)
    must not widen the second's tolerance, in validation and in the timed calls' check."""
    import torch

    from agent.harness.job import TrialRecord
    from agent.harness.judge.validate import Reference, compare_timed, compare

    trial = TrialRecord(id=0, size="s", distribution="randn", buffer="fresh", input_shapes=[[2]],
                        output_shapes=[[2], [2]], output_dtypes=["float32", "float32"], eager_error=1e3,
                        eager_errors=[1e3, 1e-7])
    tiny = torch.tensor([1e-12, -1e-12], dtype=torch.float64)
    plain = torch.tensor([1.0, 2.0], dtype=torch.float64)
    ref = Reference(trials=[trial], truths=[[tiny, plain]], pool=[[tiny, plain]])
    noise = torch.tensor([1e-9, 0.0])
    assert compare(ref, [trial], [[noise, plain.float()]], []).passed  # noise on the zero output: fine
    off = compare(ref, [trial], [[noise, torch.tensor([1.0, 2.001])]], [])
    assert not off.passed and off.checks[0].tolerance == 1e-4 and "output 1" in off.message
    assert compare_timed(ref, [0], [[noise, torch.tensor([1.0, 2.001])]], 10) is not None
    assert compare_timed(ref, [0], [[noise, plain.float()]], 10) is None


# ---------------------------------------------------------------- --precision kernelbench

GELU = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench level 1 #26's shape: GELU of torch.rand inputs."""

    def forward(self, x):
        return torch.nn.functional.gelu(x)


batch_size = 16
dim = 16384


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
'''

GELU_ANSWER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, BODY, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
        return out
'''


def test_kernelbench_error_is_allclose_with_its_tolerance_element_by_element():
    """KernelBench v0/v0.1 (src/eval.py): torch.allclose(ref, out, atol=1e-2, rtol=1e-2); the error shown is at most
    the tolerance exactly where allclose holds, and NaN/Inf are judged as at fp32."""
    import torch

    from agent.harness.judge import kernelbench

    assert kernelbench.tolerance() == 1e-2 and settings().validation.kernelbench_trials == 5
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        t = torch.randn(64, generator=g, dtype=torch.float64) * 10 ** float(torch.randint(-3, 4, (1,), generator=g))
        o = (t + torch.randn(64, generator=g, dtype=torch.float64) * 10 ** float(
            torch.randint(-5, 0, (1,), generator=g))).float()
        assert (kernelbench.error(o, t) <= 1e-2) == torch.allclose(o.double(), t, atol=1e-2, rtol=1e-2)
    assert kernelbench.error(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0], dtype=torch.float64)) == \
        float("inf")


def test_kernelbench_draws_the_problems_own_inputs_five_times_at_its_own_size():
    from agent.harness.judge import kernelbench
    from agent.schema import SizeSet

    trials = kernelbench.trials([SizeSet(label="full"), SizeSet(label="odd", overrides={"n": 3})], seed=7)
    assert [(t.size, t.distribution) for t in trials] == [(0, "problem")] * 5
    assert len({t.seed for t in trials}) == 5 and [t.buffer for t in trials][:3] == ["fresh", "same", "new"]


def judge_gelu(tmp_path, body: str, precision: str) -> dict:
    problem, answer = tmp_path / "gelu.py", tmp_path / f"gelu_{abs(hash(body))}.py"
    problem.write_text(GELU)
    answer.write_text(GELU_ANSWER.replace("BODY", body))
    out = subprocess.run([sys.executable, "-m", "agent", "eval", str(answer), "--problem", str(problem), "--stage",
                          "correctness", "--device", "cpu", "--no-timing", "--json", "--precision", precision],
                         capture_output=True, text=True, timeout=600)
    assert out.stdout.strip(), out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_an_approximation_within_kernelbenchs_tolerance_passes_only_under_kernelbench(tmp_path):
    """GELU as x * sigmoid(1.702 x): 4.5e-3 off at x = 1, inside KernelBench's allclose on its own torch.rand draws
    (what a published result would call correct), 5e-3 relative, far outside fp32's 1e-4. A clearly wrong answer
    (ReLU) is incorrect under both."""
    approx = "x * tl.sigmoid(1.702 * x)"
    fp32 = judge_gelu(tmp_path, approx, "fp32")
    assert fp32["verdict"] == "incorrect" and "> tolerance 0.0001" in fp32["message"]
    kb = judge_gelu(tmp_path, approx, "kernelbench")
    assert kb["verdict"] == "correct", kb["message"]
    assert "KernelBench's check" in kb["message"] and "--precision kernelbench" in kb["message"]
    assert [(c["size"], c["distribution"]) for c in kb["checks"]] == [("cpu", "problem")] * 5
    assert all(2e-3 < c["error"] <= 1e-2 and c["tolerance"] == 1e-2 for c in kb["checks"])
    relu = "tl.maximum(x, 0.0)"
    assert judge_gelu(tmp_path, relu, "fp32")["verdict"] == "incorrect"
    wrong = judge_gelu(tmp_path, relu, "kernelbench")
    assert wrong["verdict"] == "incorrect" and "> tolerance 0.01" in wrong["message"]
    assert "--precision kernelbench" in wrong["message"]


def test_the_prompt_and_the_report_say_kernelbench_when_the_run_uses_it():
    from agent.catalog import find_gpu as gpu
    from agent.prompts import PromptInput, render as render_prompt
    from agent.stages import get_stage
    from agent.view.report import _numerics

    inp = PromptInput(stage=get_stage("memory-fusion"), gpu=gpu("h100"), code="x = 1\n", precision="kernelbench")
    text = render_prompt(inp)
    assert "[NUMERICS]" in text and "KernelBench's own check" in text and "0.01 + 0.01 x |reference|" in text
    assert _numerics("kernelbench") == "kernelbench (KernelBench's check: atol = rtol = 0.01)"
    assert _numerics("fp32") == "fp32" and _numerics("tf32") == "tf32 (tolerance floor 0.002)"


@pytest.mark.slow  # a run of iteration 0 on the CPU
@pytest.mark.timeout(600)
def test_agent_run_records_kernelbench_with_the_run_and_shows_it_in_the_verdict(tmp_path):
    from agent.store import Store

    run = subprocess.run([sys.executable, "-m", "agent", "run", "--device", "cpu", "--llm", "offline", "--iterations",
                          "0", "--precision", "kernelbench", "--root", str(tmp_path)], capture_output=True, text=True,
                         timeout=500)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "numerics" in run.stdout and "--precision kernelbench" in run.stdout
    with Store(tmp_path) as store:
        [record] = store.list_runs()
        assert record.config.precision == "kernelbench"
    [row] = json.loads(subprocess.run([sys.executable, "-m", "agent", "leaderboard", "--root", str(tmp_path), "--json",
                                       "--all"], capture_output=True, text=True, timeout=120).stdout)
    show = subprocess.run([sys.executable, "-m", "agent", "show", row["candidate"], "--root", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
    assert row["verdict"] == "correct" and "by KernelBench's check" in show.stdout, show.stdout
