"""Prompt rendering: the seed byte for byte, every stage x GPU x problem, metrics formatting, feedback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SEED_PROMPT

from agent.catalog import load_catalog, resolve_gpu
from agent.errors import UserError
from agent.problems import list_problems, load_problem, starting_code
from agent.prompts import (
    NO_METRICS,
    PromptInput,
    format_metrics,
    load_metrics_json,
    render,
    stage_table,
)
from agent.schema import Feedback, Verdict
from agent.stages import get_stage, load_stages

DATA = Path(__file__).parent / "data"
SEED_METRICS = DATA / "seed_metrics.json"


def seed_input(**changes) -> PromptInput:
    fields = dict(stage=get_stage("memory-fusion"), gpu=resolve_gpu("4090"),
                  code=starting_code(load_problem("gap44")), metrics=load_metrics_json(SEED_METRICS))
    return PromptInput(**(fields | changes))


def seed_text() -> bytes:
    if not SEED_PROMPT.exists():
        pytest.skip(f"the seed prompt is not beside the checkout ({SEED_PROMPT})")
    return SEED_PROMPT.read_bytes()


def test_memory_fusion_render_is_the_seed_byte_for_byte():
    assert render(seed_input()).encode("utf-8") == seed_text()


def test_empty_feedback_and_a_reference_leave_the_seed_unchanged():
    ref = load_problem("gap44").path.read_text()
    assert render(seed_input(feedback=[], reference=ref)).encode("utf-8") == seed_text()


def test_extra_metrics_in_the_file_are_dropped_and_the_order_is_the_stages():
    table = load_metrics_json(SEED_METRICS)
    kernel = next(iter(table))
    shuffled = {kernel: {"gpu__time_duration.sum": 123456.0, **dict(reversed(list(table[kernel].items())))}}
    assert render(seed_input(metrics=shuffled)).encode("utf-8") == seed_text()


def test_feedback_block_lists_verdicts_and_indented_messages():
    fb = [Feedback(candidate="it2-c1", verdict=Verdict.INCORRECT, message="size cpu-odd: error 0.31\nsecond line"),
          Feedback(candidate="it2-c2", verdict=Verdict.COMPILE_ERROR, message="")]
    text = render(seed_input(feedback=fb))
    block = (
        "\n\n[FEEDBACK FROM PREVIOUS ATTEMPTS]\n"
        "The evaluator's verdicts on earlier candidates for this prompt. Fix what they report; do not repeat the same mistake.\n"
        "- it2-c1: incorrect\n  size cpu-odd: error 0.31\n  second line\n"
        "- it2-c2: compile_error\n"
        "\n**Task**"
    )
    assert block in text
    # everything else is the seed
    assert text.replace(block, "\n\n**Task**").encode() == render(seed_input()).encode()


def test_memory_block_follows_the_feedback_and_an_empty_memory_leaves_the_seed_unchanged():
    assert render(seed_input(memory=[])).encode("utf-8") == seed_text()
    fb = [Feedback(candidate="#1", verdict=Verdict.INCORRECT, message="wrong")]
    memory = ['i1-c1 from i0-c0 (memory-fusion): "split rows" → correct, 2 ms, 1.50x faster than its parent',
              'i1-c2 from i0-c0 (memory-fusion): "atomics" → incorrect: incorrect in 6 of 6 trials']
    text = render(seed_input(feedback=fb, memory=memory))
    block = (
        "\n\n[MEMORY]\n"
        "What this run has already tried on this problem and what came of it, oldest first (each: candidate, the one it "
        "started from, stage, the finding it was asked to address, its idea, verdict, time). Do not propose an idea again "
        "that failed or made its parent slower; build on what made one faster.\n"
        f"- {memory[0]}\n- {memory[1]}\n"
        "\n**Task**"
    )
    assert "- #1: incorrect\n  wrong" + block in text
    assert text.replace(block, "\n\n**Task**") == render(seed_input(feedback=fb))


@pytest.mark.parametrize("stage", [s.name for s in load_stages()])
def test_every_stage_shows_the_memory_block(stage):
    text = render(seed_input(stage=get_stage(stage), memory=["i1-c1: tried"]))
    assert "[MEMORY]" in text and "- i1-c1: tried\n" in text
    assert text.index("[MEMORY]") < text.index("**Task**")


def test_long_feedback_messages_keep_head_and_tail():
    message = "HEAD " + "x" * 10_000 + " TAIL"
    text = render(seed_input(feedback=[Feedback(candidate="c", verdict=Verdict.RUNTIME_ERROR, message=message)]))
    assert "HEAD" in text and "TAIL" in text and "characters cut" in text
    assert len(text) < len(render(seed_input())) + 3000


def test_no_metrics_is_stated_not_left_blank():
    text = render(seed_input(metrics={}))
    assert f"[NCU PROFILING METRICS]\n{NO_METRICS}\n\n**Task**" in text


def test_format_metrics_rounds_to_two_decimals_and_prints_integral_values_as_integers():
    text = format_metrics({"k": {"a": 3.78123, "b": 32.0, "c": 32, "d": 1.005e9, "e": float("nan"), "f": 88.705}})
    assert json.loads(text) == {"k": {"a": 3.78, "b": 32, "c": 32, "d": 1005000000, "e": None, "f": round(88.705, 2)}}
    assert '"b": 32,' in text and '"d": 1005000000,' in text


def test_stage_table_keeps_the_stages_metrics_in_order_and_omits_missing_ones():
    stage = get_stage("memory-fusion")
    table = {"k": {"lts__t_sector_hit_rate.pct": 1, "launch__grid_size": 2, "other": 3}}
    assert list(stage_table(table, stage)["k"]) == ["launch__grid_size", "lts__t_sector_hit_rate.pct"]


@pytest.mark.parametrize("content,why", [
    ("{", "not valid JSON"),
    ("[1, 2]", "kernel -> metric -> number"),
    ('{"k": {"m": "fast"}}', "at k/m"),
    ('{"k": [1]}', "at k"),
    ('{"k": {"m": true}}', "true/false"),
])
def test_malformed_metrics_json_is_one_line(tmp_path, content, why):
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(UserError, match=why) as e:
        load_metrics_json(path)
    assert "\n" not in e.value.message


def test_missing_metrics_file(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_metrics_json(tmp_path / "none.json")


STAGES = [s.name for s in load_stages()]
GPUS = [g.key for g in load_catalog()]
PROBLEMS = [p.name for p in list_problems()]


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("problem", PROBLEMS)
def test_every_stage_renders_for_every_gpu_and_problem(stage, gpu, problem):
    p, s, g = load_problem(problem), get_stage(stage), resolve_gpu(gpu)
    code = starting_code(p) or "import torch\n"
    reference = p.path.read_text()
    bare = render(PromptInput(stage=s, gpu=g, code=code, reference=reference))
    full = render(PromptInput(stage=s, gpu=g, code=code, reference=reference, metrics=load_metrics_json(SEED_METRICS),
                              feedback=[Feedback(candidate="c1", verdict=Verdict.TIMEOUT, message="took 180 s")]))
    for text in (bare, full):
        assert f"GPU Name: {g.name}\n" in text and f"Focus: {s.focus}\n" in text
        assert "```python\n" + code + "```\n" in text
        assert text.endswith("```python\n# <optimized Triton code>\n```\n")
        assert "\n\n\n\n\n" not in text
    assert NO_METRICS in bare and "[FEEDBACK" not in bare
    assert "launch__grid_size" in full or "launch__grid_size" not in s.metrics
    assert "- c1: timeout\n  took 180 s\n" in full


@pytest.mark.parametrize("stage", ["correctness", "algebraic"])
def test_stages_that_need_the_math_show_the_reference_model(stage):
    ref = load_problem("gap44").path.read_text()
    text = render(seed_input(stage=get_stage(stage), reference=ref))
    assert "[REFERENCE PYTORCH MODEL]" in text and "class Model(nn.Module):" in text


def test_correctness_without_code_asks_for_it_from_the_reference():
    text = render(seed_input(stage=get_stage("correctness"), code="", reference="class Model: pass\n"))
    assert "[CURRENT CODE]\n(no code yet" in text


def test_stage_rules_use_the_target_gpus_numbers():
    text = render(seed_input(stage=get_stage("parallelism"), gpu=resolve_gpu("h100")))
    assert "Grid of at least 264 programs (2+ waves on 132 SMs)" in text


def test_non_seed_stages_hold_rules_checklist_and_pattern():
    for s in load_stages():
        text = render(seed_input(stage=s))
        for part in ("Key Principle:", "Rules:", "✅", "❌", "Verification:", "Pattern", "num_"):
            assert part in text, (s.name, part)


def test_a_missing_variable_is_an_error_not_an_empty_string():
    import jinja2

    from agent.prompts import _env

    with pytest.raises(jinja2.UndefinedError):
        _env().from_string("Focus: {{ stage.focus }}\n").render()


def test_memory_fusion_says_what_its_rules_allow_with_the_diagnosis_and_the_seed_stays_the_seed():
    """The layout change of a heavy layer's operands, the bias folded into the epilogue and split reductions are
    allowed (agent.harness.judge.rules); the seed's text cannot say so, the [DIAGNOSIS] block does."""
    from agent.diagnosis import Finding

    finding = Finding(kind="outside-kernels", kernel="", evidence="87 % outside", direction="speed up the layer",
                      remedy="library-layout")
    text = render(seed_input(diagnosis=[finding]))
    block = text[text.index("[DIAGNOSIS]"):]
    assert "This stage's rules allow:" in block and "channels-last" in block and "is its operand, not an intermediate" in block
    assert "without its bias" in block and "split reduction" in block
    assert "This stage's rules allow:" not in render(seed_input())
