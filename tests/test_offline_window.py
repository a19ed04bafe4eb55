"""The offline proposer's window families (agent.offline): a max-pool with non-overlapping windows before the global
average pool (KernelBench #8 and #96). `pool`: the producer stays in PyTorch, each window's maximum is taken as the
producer's output is read and summed for the mean, the pooled tensor never written. `pool_fused` (an
nn.ConvTranspose3d whose stride divides the window): the transposed convolution computed window by window inside the
kernel, only the taps that reach each window element generated, so the conv output (1 GB at #96's sizes) is never
written either. Judged by the real harness in CPU mode."""

from __future__ import annotations

import os
import textwrap

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

from agent.catalog import find_gpu  # noqa: E402
from agent.harness.static.extract import extract_code  # noqa: E402
from agent.offline import OfflineProposer, Unsupported, Variant, recognise, render  # noqa: E402
from agent.problems import load_problem  # noqa: E402
from agent.protocols import ProposalContext  # noqa: E402
from agent.schema import Verdict  # noqa: E402

H100 = find_gpu("h100")
KB96, KB08 = "kb_96_convt3d_mul_maxpool_gap_clamp", "kb_08_conv3d_div_maxpool_gap_bias_sum"


def problem(tmp_path, name: str, producer: str, forward: str, size: str, init: str = "") -> str:
    """A KernelBench-style file: producer -> forward's body on y -> returned."""
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(f"""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.{producer}
                self.pool = nn.MaxPool3d(2)
                {init or 'pass'}

            def forward(self, x):
                y = self.conv(x)
                {forward}


        def get_inputs():
            return [torch.randn({size})]


        def get_init_inputs():
            return []
        """))
    return str(path)


def families(p, k: int = 40) -> list[str]:
    prop = OfflineProposer(load_problem(p), H100)
    answers = prop.propose(ProposalContext(prompt="p", k=k, stage="memory-fusion", code="")).answers
    return [prop.variant_of(extract_code(a.text)).family for a in answers]


def variant(family: str, block: int, split: int = 1) -> Variant:
    return Variant(family=family, block=block, warps=4, stages=1, split=split)


# ---------------------------------------------------------------- what it recognises and proposes


def test_the_max_pool_is_a_window_the_ops_around_it_keep_their_side():
    kb96 = recognise(load_problem(KB96))
    assert kb96.window == [2, 2, 2] and kb96.window_fused
    assert [op.name for op in kb96.pre] == ["mul"] and not kb96.pooled  # x scale before the max stays before it
    assert [op.name for op in kb96.post] == ["clamp_min", "clamp_max"]  # torch.clamp after the mean: two bounds
    kb08 = recognise(load_problem(KB08))
    assert kb08.window == [2, 2, 2] and not kb08.window_fused  # a direct Conv3d: the PyTorch-producer family only
    assert kb08.rowwise is not None and kb08.rowwise.reduce == "sum"
    assert recognise(load_problem("gap44")).window is None


def test_affine_ops_after_the_max_move_after_the_mean_those_before_it_never(tmp_path):
    p = problem(tmp_path, "sides", "ConvTranspose3d(2, 3, 3, stride=2, padding=1)",
                "return (self.pool(y * -2.0) + 1.0).relu().mean(dim=(2, 3, 4)) * 3.0", "2, 2, 3, 4, 5")
    plan = recognise(load_problem(p))
    assert [op.name for op in plan.pre] == ["mul"]  # max(-2y) is not -2 max(y)
    assert [op.name for op in plan.pooled] == ["add", "relu"] and [op.name for op in plan.post] == ["mul"]


@pytest.mark.parametrize("pool, why", [
    ("nn.MaxPool3d(2, stride=1)", "non-overlapping"),
    ("nn.MaxPool3d(2, padding=1)", "non-overlapping"),
    ("nn.MaxPool3d(2, ceil_mode=True)", "non-overlapping"),
    ("nn.MaxPool3d(2, dilation=2)", "non-overlapping"),
])
def test_a_max_pool_other_than_tiling_windows_is_declined_with_a_reason(tmp_path, pool, why):
    p = problem(tmp_path, "odd_pool", "Conv3d(2, 3, 3)", "return self.pool(y).mean(dim=(2, 3, 4))", "2, 2, 6, 6, 6",
                init=f"self.pool = {pool}")
    with pytest.raises(Unsupported, match=why):
        recognise(load_problem(p))


def test_a_max_pool_after_the_mean_is_declined(tmp_path):
    p = problem(tmp_path, "late_pool", "Conv3d(2, 3, 3)", "return self.pool(y.mean(dim=2, keepdim=True))",
                "2, 2, 6, 6, 6")
    with pytest.raises(Unsupported):
        recognise(load_problem(p))


def test_only_the_window_families_are_proposed_the_fused_one_first():
    kb96 = families(KB96)
    assert kb96[0] == "pool_fused" and set(kb96) == {"pool", "pool_fused"}
    assert set(families(KB08)) == {"pool"}


def test_a_max_pool_after_a_transposed_conv2d_takes_no_closed_form_and_no_fused_conv(tmp_path):
    """The closed form (algebraic) and the implicit-GEMM conv (fused) average the conv's own output: with a max-pool
    between, only the window families apply, at every stage (the algebraic one included)."""
    p = tmp_path / "convt2d_pool.py"
    p.write_text(textwrap.dedent("""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.ConvTranspose2d(3, 4, 3)

            def forward(self, x):
                return F.max_pool2d(self.conv(x), 2).mean(dim=(2, 3))


        def get_inputs():
            return [torch.randn(2, 3, 9, 9)]


        def get_init_inputs():
            return []
        """))
    plan = recognise(load_problem(str(p)))
    assert plan.window == [2, 2] and not plan.algebraic and plan.conv_k is None
    prop = OfflineProposer(load_problem(str(p)), H100)
    answers = prop.propose(ProposalContext(prompt="p", k=8, stage="algebraic", code="")).answers
    assert answers and {prop.variant_of(extract_code(a.text)).family for a in answers} == {"pool"}


def test_a_window_family_refuses_a_plan_without_a_window_and_the_others_one_with():
    with pytest.raises(ValueError, match="pool family"):
        render(recognise(load_problem("gap44")), variant("pool", 1024), H100)
    with pytest.raises(ValueError, match="row family"):
        render(recognise(load_problem(KB96)), Variant(family="row", block=1024, warps=4, stages=1), H100)


def test_the_fused_window_kernel_never_calls_the_conv_and_adds_its_bias_before_the_scale():
    code = render(recognise(load_problem(KB96)), variant("pool_fused", 64), H100)
    assert "self.conv_transpose(x)" not in code and "conv_transpose3d" not in code
    kernel = code[code.index("def convt_window_gap_kernel"):code.index("def convt_window_combine_kernel")]
    assert kernel.index("v = v + o3[None, :]") < kernel.index("v = v * s0") < kernel.index("best = tl.maximum")
    combine = code[code.index("def convt_window_combine_kernel"):code.index("def gap(")]
    assert "tl.maximum(r, s1)" in combine and "tl.minimum(r, s2)" in combine  # the clamp, once per (n, c)


# ---------------------------------------------------------------- judged by the real harness


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_harness_judges_both_window_families_correct_within_the_memory_fusion_rules(tmp_path):
    """At every CPU size (odd ones: windows cut by the floor, partial tiles), a negative scale before the max, no
    bias, a window of twice the stride, a 2D functional max-pool with a reduction over the channels after it."""
    from agent.harness import EvalRequest, evaluate_many
    from agent.stages import get_stage

    convt = problem(tmp_path, "convt", "ConvTranspose3d(3, 5, 3, stride=2, padding=1)",
                    "return torch.clamp(self.pool(y * -0.5).mean(dim=(2, 3, 4), keepdim=True), min=-0.2)",
                    "2, 3, 4, 5, 6")
    wide = problem(tmp_path, "wide", "ConvTranspose3d(2, 4, 3, stride=2, bias=False)",
                   "return self.pool(torch.relu(y)).mean(dim=(2, 3, 4))", "3, 2, 5, 4, 3",
                   init="self.pool = nn.MaxPool3d(4)")
    two_d = tmp_path / "two_d.py"
    two_d.write_text(textwrap.dedent("""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 6, 3)

            def forward(self, x):
                y = F.max_pool2d(torch.tanh(self.conv(x)), 3)
                return torch.sum(y.mean(dim=(2, 3)), dim=1, keepdim=True)


        def get_inputs():
            return [torch.randn(2, 3, 17, 14)]


        def get_init_inputs():
            return []
        """))
    cases = [(convt, variant("pool_fused", 64)), (convt, variant("pool", 256, split=2)),
             (wide, variant("pool_fused", 32)), (str(two_d), variant("pool", 512, split=3))]
    reqs = [EvalRequest(source=render(recognise(load_problem(p)), v, H100), problem=load_problem(p),
                        stage=get_stage("memory-fusion"), device="cpu", time_it=False) for p, v in cases]
    results = evaluate_many(reqs)
    assert [r.verdict for r in results] == [Verdict.CORRECT] * len(reqs), \
        [r.message for r in results if r.verdict != Verdict.CORRECT]
