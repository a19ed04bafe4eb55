"""The offline proposer: what it recognises, what it proposes and in which order, and that every kernel it
writes computes what the problem's Model computes (CPU mode, TRITON_INTERPRET=1, fp64 truth)."""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported: kernels run on CPU tensors

import torch  # noqa: E402

from agent.catalog import find_gpu  # noqa: E402
from agent.harness.static import policy  # noqa: E402
from agent.harness.static.extract import extract_code  # noqa: E402
from agent.offline import ANCHORS, OfflineProposer, Plan, Variant, recognise, render  # noqa: E402
from agent.problems import load_module, load_problem  # noqa: E402
from agent.protocols import (
    ProposalContext,  # noqa: E402
    Proposer,  # noqa: E402
)
from agent.schema import EvalResult, KernelProfile, Profile, StageRules, Timing, Verdict  # noqa: E402
from agent.stages import absent_triton_functions  # noqa: E402

H100 = find_gpu("h100")
GAP44 = load_problem("gap44")
MEMORY_FUSION_RULES = StageRules(forbid_store_then_load=True, max_intermediate_write=0.125)
_count = itertools.count()



def state(stage: str, code: str, profile, results, timing=None) -> dict:
    """What the loop passes with the next prompt: the stage, the current best, its profile and what it means (the
    findings, as the loop computes them), the last results."""
    from agent.diagnosis import for_prompt

    return {"stage": stage, "code": code, "profile": profile, "results": list(results),
            "findings": for_prompt(profile, timing, limit=None)}


def ask(p, st: dict | None, k: int) -> list:
    return p.propose(ProposalContext(prompt="prompt", k=k, **(st or {"stage": "memory-fusion"}))).answers

def seed_profile() -> Profile:
    """The seed kernel's figures on an H100 (DESIGN.md): grid 32, few warps active, DRAM 23.5 %, 686 µs."""
    name = "fused_multiply_gap_kernel_optimized"
    return Profile(gpu="H100", kernels={name: KernelProfile(name=name, metrics={
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": 3.78,
        "launch__grid_size": 32,
        "sm__warps_active.avg.pct_of_peak_sustained_active": 8.33,
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": 23.5,
        "lts__t_sector_hit_rate.pct": 30.34,
        "gpu__time_duration.sum": 686_000.0,
    })})


def near_peak_profile(kernel: str) -> Profile:
    return Profile(gpu="H100", kernels={kernel: KernelProfile(name=kernel, metrics={
        "launch__grid_size": 2048,
        "sm__warps_active.avg.pct_of_peak_sustained_active": 78.0,
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": 91.2,
        "gpu__time_duration.sum": 177_000.0,
    })})


@pytest.fixture(scope="module")
def plan() -> Plan:
    return recognise(GAP44)


@pytest.fixture(scope="module")
def seeded() -> OfflineProposer:
    """A proposer that has seen the seed kernel and its metrics, and made its first 12 proposals."""
    p = OfflineProposer(GAP44, H100)
    p_state = state("memory-fusion", GAP44.start.read_text(), seed_profile(), [])
    p.first = ask(p, p_state, 12)
    return p


def import_code(code: str, tmp_path: Path):
    """Import a candidate from a file, as the harness does (Triton reads kernel source from files)."""
    path = tmp_path / f"cand_{next(_count)}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def relative_error(code: str, problem, overrides: dict, tmp_path: Path) -> float:
    """max |ModelNew - Model(fp64)| / max |Model(fp64)|, same seed so the same weights."""
    cand = import_code(code, tmp_path)
    m = load_module(problem.path, overrides)
    torch.manual_seed(0)
    ref = m.Model(*m.get_init_inputs())
    torch.manual_seed(0)
    new = cand.ModelNew(*m.get_init_inputs())
    assert set(new.state_dict()) == set(ref.state_dict()), "ModelNew must create the same parameters"
    new.load_state_dict(ref.state_dict())
    torch.manual_seed(1)
    x = m.get_inputs()[0] * 2 - 0.5  # signed values: a kernel that drops terms cannot hide behind all-positive sums
    with torch.no_grad():
        truth = ref.double()(x.double())
        out = new(x)
    assert out.shape == truth.shape and out.dtype == x.dtype
    return ((out.double() - truth).abs().max() / truth.abs().max()).item()


def family_of(p: OfflineProposer, answer) -> str:
    return p.variant_of(extract_code(answer.text)).family


# ---------------------------------------------------------------- recognising the problem


def test_recognises_gap44_as_conv_transpose_then_a_scaled_mean(plan):
    assert plan.producer == ["conv_transpose"] and plan.producer_kind == "ConvTranspose2d"
    assert plan.pre == []  # the multiplier commutes with the mean: applied once per row, after it
    assert [op.name for op in plan.post] == ["mul"] and plan.operands[0].expr == "self.multiplier"
    assert (plan.batch, plan.channels, plan.length, plan.out_ones) == (16, 128, 256 * 256, 2)
    assert plan.mid_bytes == 16 * 128 * 256 * 256 * 4 and plan.in_bytes == 16 * 64 * 128 * 128 * 4
    assert plan.algebraic


def test_satisfies_the_proposer_protocol():
    p = OfflineProposer(GAP44, H100)
    assert isinstance(p, Proposer) and p.name == "offline"


def test_a_problem_of_another_family_gets_no_answers(tmp_path):
    path = tmp_path / "softmax.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n\n"
        "    def forward(self, x):\n        return torch.softmax(x, dim=1)\n\n\n"
        "def get_inputs():\n    return [torch.rand(4, 8, 5, 5)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    p = OfflineProposer(load_problem(str(path)), H100)
    assert ask(p, None, 4) == []


# ---------------------------------------------------------------- what it proposes, in which order


def test_seed_metrics_lead_to_more_programs_first_and_the_text_cites_them(seeded):
    first = seeded.first[:4]
    assert {family_of(seeded, a) for a in first} <= {"row", "split", "atomic", "persistent"}
    assert family_of(seeded, first[0]) == "row" and "split" in {family_of(seeded, a) for a in first}
    for a in first:
        line = a.text.splitlines()[0]
        assert "grid 32 < 2×132 SMs" in line and "warps active 8.3 %" in line and "DRAM 23.5 %" in line
        assert "programs" in line  # says how many programs the rewrite launches
    assert "2048 programs" in first[0].text.splitlines()[0]
    assert all(a.model == "offline" and a.usage.cost_usd == 0 and a.usage.prompt_tokens == 0 for a in seeded.first)


def test_every_answer_is_one_python_block_defining_model_new_that_passes_the_static_policy(seeded):
    for a in seeded.first:
        code = extract_code(a.text)
        assert code is not None and a.text.count("```python") == 1
        assert "class ModelNew(nn.Module)" in code
        assert policy.check(code, MEMORY_FUSION_RULES, absent_triton_functions()) == []


def test_never_repeats_a_variant_until_the_space_is_spent():
    p = OfflineProposer(GAP44, H100)
    p_state = state("memory-fusion", GAP44.start.read_text(), seed_profile(), [])
    texts = []
    while batch := ask(p, p_state, 64):
        texts += [extract_code(a.text) for a in batch]
    assert len(texts) == len(set(texts)) == sum(
        len(list(itertools.product(*s.values()))) for f, s in __import__("agent.offline").offline.SPACE.items()
        # gap44: no closed form at its stage, a transposed conv (not fused), no max-pool (the window families)
        if f not in ("algebraic", "fused", "pool", "pool_fused"))


def test_the_same_observations_give_the_same_proposals():
    runs = []
    for _ in range(2):
        p = OfflineProposer(GAP44, H100)
        p_state = state("memory-fusion", GAP44.start.read_text(), seed_profile(), [])
        first = ask(p, p_state, 4)
        best = extract_code(first[2].text)
        p_state = state("memory-fusion", best, near_peak_profile("gap_row_kernel"), [])
        runs.append([a.text for a in first + ask(p, p_state, 4)])
    assert runs[0] == runs[1]


def test_near_dram_peak_it_tunes_meta_parameters_around_the_current_best(seeded):
    p = OfflineProposer(GAP44, H100)
    p_state = state("memory-fusion", GAP44.start.read_text(), seed_profile(), [])
    first = ask(p, p_state, 4)
    best = p.variant_of(extract_code(first[0].text))  # row, BLOCK 2048, 4 warps, 2 stages
    p_state = state("memory-fusion", extract_code(first[0].text), near_peak_profile("gap_row_kernel"), [])
    nxt = ask(p, p_state, 4)
    variants = [p.variant_of(extract_code(a.text)) for a in nxt]
    for v, a in zip(variants, nxt):
        assert v.family == "row"
        changed = [k for k in ("block", "warps", "stages") if getattr(v, k) != getattr(best, k)]
        assert len(changed) == 1  # one step from the current best
        line = a.text.splitlines()[0]
        assert "DRAM 91.2 %" in line and "meta-parameter search" in line and "→" in line


def test_a_family_that_keeps_failing_goes_last():
    p = OfflineProposer(GAP44, H100)
    p_state = state("memory-fusion", GAP44.start.read_text(), seed_profile(), [])
    first = ask(p, p_state, 8)
    failed = [EvalResult(verdict=Verdict.COMPILE_ERROR, message="no", code=extract_code(a.text))
              for a in first if family_of(p, a) == "split"]
    assert len(failed) >= 2
    p_state = state("memory-fusion", GAP44.start.read_text(), seed_profile(), failed)
    assert all(family_of(p, a) != "split" for a in ask(p, p_state, 8))


def test_the_algebraic_stage_proposes_the_closed_form_first(seeded):
    p = OfflineProposer(GAP44, H100)
    p_state = state("algebraic", GAP44.start.read_text(), near_peak_profile("gap_row_kernel"), [])
    answers = ask(p, p_state, 3)
    assert [family_of(p, a) for a in answers] == ["algebraic"] * 3
    line = answers[0].text.splitlines()[0]
    assert "algebraic rewrite" in line and "67 MB" in line and "537 MB" in line
    code = extract_code(answers[0].text)
    assert "self.conv_transpose(x)" not in code  # the conv output is never materialised
    assert policy.kernel_names(code) == ["convt_gap_kernel"]  # one launch per call


# ---------------------------------------------------------------- the kernels compute the right thing


@pytest.mark.parametrize("index", [0, 1, 3, 4, 5, 9])  # row, split, persistent, atomic, row, atomic (S=4)
def test_proposed_kernels_match_the_reference_at_both_cpu_sizes(seeded, index, tmp_path):
    code = extract_code(seeded.first[index].text)
    for size in GAP44.cpu_sizes:
        assert relative_error(code, GAP44, size.overrides, tmp_path) < 1e-5, (index, size.label)


@pytest.mark.parametrize("family", ["row", "split", "persistent"])
def test_small_blocks_and_many_warps_stay_exact(plan, family, tmp_path):
    # a block smaller than a row (several loop trips, a masked tail) and a split finer than the row
    v = Variant(family=family, block=1024 if family != "persistent" else 2048, warps=16 if family == "row" else 4,
                stages=1, split=16 if family == "split" else 1)
    code = render(plan, v, H100)
    for size in GAP44.cpu_sizes:
        assert relative_error(code, GAP44, size.overrides, tmp_path) < 1e-5


@pytest.mark.parametrize("kernel_size,stride,padding,output_padding", [
    (3, 2, 1, 1),  # gap44's own
    (4, 3, 2, 2),
    (5, 1, 0, 0),
    (2, 2, 0, 1),
    (3, 1, 2, 0),  # padding beyond the kernel's reach on one side
    (1, 3, 0, 2),
])
def test_the_algebraic_rewrite_is_exact_for_any_stride_padding_and_output_padding(plan, tmp_path, kernel_size, stride,
                                                                                   padding, output_padding):
    code = render(plan, Variant(family="algebraic", **ANCHORS["algebraic"]), H100)
    sizes = {"batch_size": 2, "in_channels": 3, "out_channels": 5, "height": 13, "width": 10,
             "kernel_size": kernel_size, "stride": stride, "padding": padding, "output_padding": output_padding}
    assert relative_error(code, GAP44, sizes, tmp_path) < 1e-5


def test_the_algebraic_rewrite_with_small_tiles_is_exact_at_both_cpu_sizes(plan, tmp_path):
    code = render(plan, Variant(family="algebraic", block=4, warps=2, stages=1, split=32), H100)
    for size in GAP44.cpu_sizes:
        assert relative_error(code, GAP44, size.overrides, tmp_path) < 1e-5


def test_the_one_launch_rewrite_is_exact_on_every_call_and_its_scratch_follows_the_shape(plan, tmp_path):
    """Its tickets are kept across calls: each call must leave them at zero, whatever the shape of the next; a
    compiled kernel assumes its pointers' alignment, so an input 4 bytes off gets a plan of its own."""
    cand = import_code(render(plan, Variant(family="algebraic", **ANCHORS["algebraic"]), H100), tmp_path)
    m = load_module(GAP44.path, GAP44.cpu_sizes[0].overrides)
    torch.manual_seed(0)
    ref = m.Model(*m.get_init_inputs()).double()
    new = cand.ModelNew(*m.get_init_inputs())
    new.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    n, c, h, w = m.get_inputs()[0].shape
    for shape, skew in [((n, c, h, w), 0), ((n, c, h, w), 0), ((n + 1, c, h - 3, w + 5), 0), ((1, c, 5, 7), 0),
                        ((n, c, h, w), 1)]:
        x = (torch.randn(math.prod(shape) + skew) + 4)[skew:].view(shape)
        with torch.no_grad():
            truth, out = ref(x.double()), new(x)
        assert ((out.double() - truth).abs().max() / truth.abs().max()).item() < 1e-5, shape
        key = next(k for k in new._plans if tuple(k[0]) == shape and k[3] == x.data_ptr() % 16)
        part, tickets = new._plans[key][3:5]
        assert part.numel() == shape[0] * c * new.conv_transpose.out_channels  # one share per plane and channel
        assert not tickets.any()  # its tickets all back at zero
    assert len(new._plans) == 4  # three shapes, and the first shape once more at another alignment


@pytest.mark.parametrize("name", ["conv3d_gap", "conv2d_gap_bias_lse", "gap_large"])
def test_other_gap_problems_get_exact_kernels(name, tmp_path):
    try:
        problem = load_problem(name)
    except Exception:
        pytest.skip(f"problem {name} is not in this checkout")
    p = OfflineProposer(problem, H100)
    p_state = state("memory-fusion", "", None, [])
    answers = ask(p, p_state, 3)
    assert len(answers) == 3 and "no ncu metrics yet" in answers[0].text.splitlines()[0]
    if name == "conv2d_gap_bias_lse":  # + bias is not a pure scale: no atomics
        assert "atomic" not in p._families(p.plan())
    size = problem.cpu_sizes[-1]
    for a in answers[:2]:
        assert relative_error(extract_code(a.text), problem, size.overrides, tmp_path) < 1e-5


@pytest.mark.slow
def test_the_harness_accepts_its_answers(seeded):
    """The real cascade (static policy, sandboxed worker, fp64 truth at both CPU sizes, three distributions)."""
    from agent.harness import EvalRequest, evaluate_many
    from agent.stages import get_stage

    algebraic = OfflineProposer(GAP44, H100)
    algebraic_state = state("algebraic", GAP44.start.read_text(), None, [])
    reqs = [EvalRequest(source=a.text, problem=GAP44, stage=get_stage(stage), device="cpu", time_it=False)
            for stage, a in [("memory-fusion", seeded.first[0]), ("memory-fusion", seeded.first[1]),
                             ("algebraic", ask(algebraic, algebraic_state, 1)[0])]]
    results = evaluate_many(reqs)
    assert [r.verdict for r in results] == [Verdict.CORRECT] * 3, [r.message for r in results]


def test_it_restructures_for_the_findings_the_prompt_shows_not_for_its_own_reading_of_the_metrics():
    """One interface for both proposers: our own kernel as the best, with the seed's figures (a 32-program grid).
    With the findings it restructures; the same profile without findings is a kernel with nothing to fix."""
    from agent.offline import OfflineProposer
    from agent.harness.static.extract import extract_code

    p = OfflineProposer(GAP44, H100)
    ours = extract_code(ask(p, None, 1)[0].text)
    assert ours is not None
    with_findings = ask(p, state("memory-fusion", ours, seed_profile(), []), 2)
    assert not any("meta-parameter search" in a.text for a in with_findings), [a.text[:100] for a in with_findings]
    q = OfflineProposer(GAP44, H100)
    ask(q, None, 1)
    without = ask(q, state("memory-fusion", ours, seed_profile(), []) | {"findings": []}, 2)
    assert all("grid and warps fine): meta-parameter search" in a.text for a in without), [a.text[:100] for a in without]


def test_a_host_bound_finding_puts_one_launch_per_call_first():
    from agent.offline import OfflineProposer

    host_bound = Timing(candidate_ms=0.12, candidate_spread_pct=1.0, device_ms=0.047, latency_ms=0.12, launches=2,
                        eager_ms=1.8, speedup_vs_eager=15.0, repeats=100, meaningful=True)
    answers = ask(OfflineProposer(GAP44, H100), state("memory-fusion", "", seed_profile(), [], host_bound), 6)
    assert answers and not any("partial sums + a combine kernel" in a.text for a in answers[:3])
    plain = ask(OfflineProposer(GAP44, H100), state("memory-fusion", "", seed_profile(), []), 6)
    assert any("partial sums + a combine kernel" in a.text for a in plain[:3])  # without it, split comes early


def test_an_uncoalesced_load_finding_puts_the_flat_contiguous_row_kernel_first():
    """The planted strided kernel's report (4 of 32 bytes used per sector, recorded on an H100) as the best's profile:
    the first proposal is the row kernel, and it says why."""
    from agent.diagnosis import DIAGNOSIS_METRICS
    from agent.ncu import read_report, stage_metric_set
    from agent.offline import OfflineProposer
    from agent.stages import get_stage

    strided = read_report(Path(__file__).parent / "data" / "ncu" / "planted_strided.ncu-rep",
                          [*stage_metric_set(get_stage("memory-fusion")), *DIAGNOSIS_METRICS])
    first = ask(OfflineProposer(GAP44, H100), state("memory-fusion", "", strided, []), 1)[0].text
    assert "uncoalesced loads: one program per (n, c) row" in first, first[:200]
    plain = ask(OfflineProposer(GAP44, H100), state("memory-fusion", "", seed_profile(), []), 1)[0].text
    assert "uncoalesced" not in plain  # the seed's findings are a small grid, not wasted sectors


# ---------------------------------------------------------------- memory: what the run tried, across processes


def remembered(p: OfflineProposer, answers: list, verdicts: list[Verdict], parent: str | None = None) -> list:
    """The memory entries the loop would hand on for `answers` (ids i1-c1, ...), each with its verdict."""
    from agent.memory import MemoryEntry

    return [MemoryEntry(candidate=f"run-i1-c{i}", iteration=1, parent=parent, stage="memory-fusion", idea=a.idea,
                        verdict=v, ms=1.0 if v == Verdict.CORRECT else None)
            for i, (a, v) in enumerate(zip(answers, verdicts), start=1)]


def test_a_new_process_given_the_runs_memory_never_proposes_what_the_killed_one_tried():
    st = state("memory-fusion", GAP44.start.read_text(), seed_profile(), [])
    p = OfflineProposer(GAP44, H100)
    first = ask(p, st, 4)
    assert [a.idea for a in first] == [p.variant_of(extract_code(a.text)).idea() for a in first]  # its variants'
    memory = remembered(OfflineProposer(GAP44, H100), first, [Verdict.CORRECT] * 4)
    resumed = OfflineProposer(GAP44, H100)  # a fresh process: nothing in-process to remember
    again = resumed.propose(ProposalContext(prompt="p", k=4, memory=memory, **st)).answers
    assert {a.idea for a in again}.isdisjoint({a.idea for a in first})
    forgetful = ask(OfflineProposer(GAP44, H100), st, 4)  # without the memory it would have proposed them again
    assert [a.idea for a in forgetful] == [a.idea for a in first]


def test_the_memory_counts_a_familys_failures_and_names_the_parents_variant():
    st = state("memory-fusion", GAP44.start.read_text(), seed_profile(), [])
    first = ask(OfflineProposer(GAP44, H100), st, 8)
    verdicts = [Verdict.COMPILE_ERROR if a.idea.startswith("split:") else Verdict.CORRECT for a in first]
    assert verdicts.count(Verdict.COMPILE_ERROR) >= 2
    memory = remembered(OfflineProposer(GAP44, H100), first, verdicts)
    nxt = OfflineProposer(GAP44, H100).propose(ProposalContext(prompt="p", k=8, memory=memory, **st)).answers
    assert all(not a.idea.startswith("split:") for a in nxt)  # the failures are the memory's, not this process's
    row = next(m for m in memory if m.idea.startswith("row:"))
    p = OfflineProposer(GAP44, H100)
    near_peak = state("memory-fusion", extract_code(first[[a.idea for a in first].index(row.idea)].text),
                      near_peak_profile("gap_row_kernel"), [])
    tuned = p.propose(ProposalContext(prompt="p", k=3, memory=memory, parent=row.candidate, **near_peak)).answers
    # a fresh process knows the parent is its own row variant from the memory alone, and tunes around it
    assert all("meta-parameter search around the current best" in a.text.splitlines()[0] for a in tuned)
    blind = OfflineProposer(GAP44, H100).propose(ProposalContext(prompt="p", k=3, memory=memory, **near_peak)).answers
    assert not any("meta-parameter search" in a.text for a in blind)  # not told the parent: it cannot know
