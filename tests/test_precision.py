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
    assert 'an error of TF32\'s size: tl.dot rounds its inputs to TF32 by default' in fp32["message"]
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
    from agent.commands.run import FIXED

    assert FIXED["precision"] == "precision"  # --precision on --resume must match what the run measured with


def test_the_tolerance_is_the_sizes_not_one_draws():
    """KernelBench #23's output is numerically zero (the mean of a group norm's output): eager's own relative error is
    rounding noise, 2e3 on one draw and less on another; an answer as noisy as eager must not fail on the quiet draw.
    A well-conditioned size keeps its own, tight tolerance."""
    import torch

    from agent.harness.job import TrialRecord
    from agent.harness.validate import Reference, compare

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
    from agent.harness.validate import Reference, compare

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
    from agent.harness.validate import Reference, compare_timed, compare

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
