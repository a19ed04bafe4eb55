"""agent.harness.extract: which code in an answer gets evaluated."""

from __future__ import annotations

from agent.harness.extract import extract_code, why_no_code

CODE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def fenced(body: str, tag: str = "python") -> str:
    return f"```{tag}\n{body}```\n"


def test_plain_python_file_is_the_code_itself():
    assert extract_code(CODE) == CODE


def test_takes_the_fenced_block_that_defines_model_new():
    answer = "Here you go:\n\n" + fenced(CODE) + "\nHope it helps."
    assert extract_code(answer) == CODE


def test_skips_usage_snippets_and_other_languages():
    answer = (fenced("pip install triton\n", "bash") + fenced("m = ModelNew()\nm(x)\n") + "Final:\n" + fenced(CODE)
              + fenced("print(m)\n"))
    assert extract_code(answer) == CODE


def test_last_defining_block_wins_over_an_earlier_draft():
    draft = CODE.replace("pass", "x = 1")
    assert extract_code(fenced(draft) + "Better:\n" + fenced(CODE)) == CODE


def test_accepts_py_and_untagged_fences_and_a_cut_off_answer():
    assert extract_code(fenced(CODE, "py")) == CODE
    assert extract_code(fenced(CODE, "")) == CODE
    assert extract_code("```python\n" + CODE) == CODE  # the model ran out of tokens before the closing fence


def test_prose_only_is_no_code():
    assert extract_code("I cannot help with that.") is None
    assert extract_code("") is None
    assert "no ```python code block" in why_no_code("I cannot help with that.")


def test_a_block_without_model_new_is_no_code_and_says_so():
    answer = fenced("class ModelOptimized:\n    pass\n")
    assert extract_code(answer) is None
    assert "none defines class ModelNew" in why_no_code(answer)


def test_a_broken_plain_file_still_counts_as_code():
    broken = "class ModelNew(nn.Module)\n    pass\n"  # syntax error: reported as such, not as no_code
    assert extract_code(broken) == broken
