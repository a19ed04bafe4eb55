"""The offline proposer's remedies from torch.compile (agent.offline, the `nhwc` family): the convolution left in
PyTorch runs in channels-last without its bias, the bias (and the epilogue) folded into the reduction (a logsumexp
over channels after it: offline.tail's kernel), a split reduction where the images and channel blocks are too few; proposed first where the
diagnosis finds the forward's time outside its kernels, and in memory-fusion before any profile. Judged by the real
harness in CPU mode at memory-fusion, whose rules they must pass."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

from agent.catalog import find_gpu  # noqa: E402
from agent.diagnosis import for_prompt  # noqa: E402
from agent.harness.static.extract import extract_code  # noqa: E402
from agent.offline import OfflineProposer, Variant, recognise, render  # noqa: E402
from agent.offline.planner import nhwc_split  # noqa: E402
from agent.problems import load_problem  # noqa: E402
from agent.protocols import ProposalContext  # noqa: E402
from agent.schema import KernelProfile, Profile, Timing, Verdict  # noqa: E402

H100 = find_gpu("h100")


def nhwc(split: int = 64, block: int = 4096) -> Variant:
    return Variant(family="nhwc", block=block, warps=4, stages=2, split=split)


def first_families(problem: str, stage: str, profile: Profile | None = None, timing: Timing | None = None,
                   k: int = 4) -> list[str]:
    p = OfflineProposer(load_problem(problem), H100)
    ctx = ProposalContext(prompt="p", k=k, stage=stage, code="", profile=profile,
                          findings=for_prompt(profile, timing, limit=None))
    return [p.variant_of(extract_code(a.text)).family for a in p.propose(ctx).answers]


def timing(device_ms: float, latency_ms: float) -> Timing:
    return Timing(meaningful=True, candidate_ms=latency_ms, candidate_spread_pct=1.0, repeats=10, device_ms=device_ms,
                  latency_ms=latency_ms)


def reduction_profile(ns: float) -> Profile:
    """One reduction kernel of `ns` on an H100 with a grid that fills it (no small-grid finding)."""
    name = "gap_row_kernel"
    return Profile(gpu="H100", kernels={name: KernelProfile(name=name, metrics={
        "launch__grid_size": 2048, "sm__warps_active.avg.pct_of_peak_sustained_active": 78.0,
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": 60.0, "gpu__time_duration.sum": ns})})


# ---------------------------------------------------------------- what it recognises and writes


def test_a_zero_padded_convolution_producer_and_a_logsumexp_over_channels_are_recognised():
    gap44, lse = recognise(load_problem("gap44")), recognise(load_problem("conv2d_gap_bias_lse"))
    assert (gap44.conv_fn, gap44.conv_bias, gap44.rowwise) == ("conv_transpose2d", True, None)
    assert (lse.conv_fn, lse.conv_bias) == ("conv2d", True) and lse.rowwise is not None
    assert recognise(load_problem("conv3d_gap")).conv_fn == "conv3d"


def test_the_conv_runs_channels_last_without_its_bias_which_the_epilogue_adds_before_the_multiplier():
    code = render(recognise(load_problem("gap44")), nhwc(), H100)
    assert "xc = x.contiguous(memory_format=fmt)" in code and "w = conv.weight.contiguous(memory_format=fmt)" in code
    assert "F.conv_transpose2d(xc, w, None, conv.stride, conv.padding, conv.output_padding" in code
    epilogue = code[code.index("def gap_nhwc_combine_kernel"):code.index("def gap(")]
    assert epilogue.index("r = r + o1") < epilogue.index("r = r * s0")  # mean(conv + b) * m, per (n, c)
    assert "return gap(x, self.conv_transpose, self.multiplier, self.conv_transpose.bias)" in code
    assert "self.conv_transpose(x)" not in code


def test_before_a_nonlinear_op_the_bias_is_added_per_element():
    code = render(recognise(load_problem("kb_67_conv2d_gelu_gap")), nhwc(split=1), H100)
    kernel = code[code.index("def gap_nhwc_kernel"):code.index("def gap(")]
    assert kernel.index("v = v + o0[None, :]") < kernel.index("tl.erf")  # gelu(conv + b), then the mean


def test_a_logsumexp_over_channels_is_computed_by_the_rows_tail_kernel_not_left_to_pytorch():
    code = render(recognise(load_problem("conv2d_gap_bias_lse")), nhwc(split=1), H100)
    assert "torch.logsumexp" not in code and "def rows_tail_kernel" in code and "rows_tail(gap(x" in code


def test_the_split_is_chosen_from_the_grid():
    assert nhwc_split(16, 128, 132) == 64  # gap44: 16 images x 1 channel block on 132 SMs
    assert nhwc_split(32, 128, 132) == 32  # conv2d_gap_bias_lse
    assert nhwc_split(512, 128, 132) == 1  # enough images: one launch


# ---------------------------------------------------------------- when it proposes them


def test_memory_fusion_before_any_profile_starts_with_the_layout_change():
    assert first_families("gap44", "memory-fusion")[0] == "nhwc"
    assert first_families("conv2d_gap_bias_lse", "memory-fusion")[0] == "nhwc"
    assert "nhwc" not in first_families("gap_large", "memory-fusion", k=12)  # no convolution: nothing to change


def test_the_diagnosis_finding_the_time_outside_the_kernels_puts_the_layout_change_first():
    profile = reduction_profile(180_000.0)  # 0.18 ms of a 1.387 ms forward: 87 % in the convolution
    outside = timing(device_ms=1.387, latency_ms=1.40)
    inside = timing(device_ms=0.25, latency_ms=0.26)
    [finding] = [f for f in for_prompt(profile, outside, limit=None) if f.kind == "outside-kernels"]
    assert finding.remedy == "library-layout" and "87 %" in finding.evidence and "channels-last" in finding.direction
    assert not [f for f in for_prompt(profile, inside, limit=None) if f.kind == "outside-kernels"]
    assert first_families("gap44", "parallelism", profile, outside)[0] == "nhwc"
    assert first_families("gap44", "parallelism", profile, inside)[0] != "nhwc"


# ---------------------------------------------------------------- judged by the harness


CASES = [("gap44", nhwc()), ("gap44", nhwc(split=1, block=1024)), ("gap44", nhwc(split=16, block=1024)),
         ("conv2d_gap_bias_lse", nhwc(split=32)), ("conv2d_gap_bias_lse", nhwc(split=64, block=1024)),
         ("kb_67_conv2d_gelu_gap", nhwc()), ("conv3d_gap", nhwc(split=4, block=1024))]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_harness_judges_every_remedy_correct_and_within_the_memory_fusion_rules():
    """At every CPU size (cpu-wide splits gap44 over 64 programs per image and channel block; cpu-odd's masks), with
    memory-fusion's run-time rules: the channels-last copies are PyTorch's, the partial sums small."""
    from agent.harness import EvalRequest, evaluate_many
    from agent.stages import get_stage

    reqs = [EvalRequest(source=render(recognise(load_problem(name)), v, H100), problem=load_problem(name),
                        stage=get_stage("memory-fusion"), device="cpu", time_it=False) for name, v in CASES]
    results = evaluate_many(reqs)
    assert [r.verdict for r in results] == [Verdict.CORRECT] * len(CASES), \
        [(name, v.idea(), r.message) for (name, v), r in zip(CASES, results) if r.verdict != Verdict.CORRECT]
