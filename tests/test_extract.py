"""agent.harness.static.extract: which code in an answer gets evaluated."""

from __future__ import annotations

from agent.harness.static.extract import declared_encoding, extract_code, why_no_code

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


KERNEL = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr):\n    pass\n"
USES_KERNEL = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        k[(1,)](x)\n        return x\n"


def test_crlf_and_lone_cr_line_ends_parse():
    assert extract_code(fenced(CODE).replace("\n", "\r\n")) == CODE
    assert extract_code(CODE.replace("\n", "\r")) == CODE


def test_a_fence_indented_inside_a_list_item_is_dedented():
    body = "".join("   " + line + "\n" if line else "\n" for line in CODE.splitlines())
    answer = "1. Here is the kernel:\n\n   ```python\n" + body + "   ```\n2. Done.\n"
    assert extract_code(answer) == CODE


def test_tab_indented_fence_and_code_with_tabs():
    tabbed = CODE.replace("    pass", "\tpass")
    answer = "- item\n\t```python\n" + "".join("\t" + ln + "\n" for ln in tabbed.splitlines()) + "\t```\n"
    assert extract_code(answer) == tabbed


def test_non_breaking_and_zero_width_spaces_are_normalised():
    assert extract_code("\ufeff" + fenced(CODE.replace("    pass", "\u00a0\u00a0\u00a0\u00a0pass\u200b"))) == CODE


def test_code_split_across_blocks_is_joined_in_order():
    answer = "Kernel:\n" + fenced(KERNEL) + "Usage:\n" + fenced("m = ModelNew()\nprint(m(x))\n") + "Model:\n" + fenced(USES_KERNEL)
    code = extract_code(answer)
    assert code == KERNEL + "\n\n" + USES_KERNEL


def test_a_usage_snippet_is_never_joined_even_when_it_binds_a_needed_name():
    snippet = "k = lambda *a: None\nk(1)\n"
    assert extract_code(fenced(snippet) + fenced(USES_KERNEL)) == USES_KERNEL


def test_a_block_with_another_tag_counts_when_no_python_block_defines_model_new():
    assert extract_code(fenced(CODE, "text")) == CODE
    assert extract_code(fenced(CODE, "Python")) == CODE


def test_nul_position_is_line_and_column():
    from agent.harness.static.extract import nul_position

    assert nul_position("a = 1\nb = \x002\n") == (2, 5)
    assert nul_position("fine") is None


def test_a_block_choosing_its_imports_with_try_or_if_is_joined():
    guarded = ("try:\n    from triton.language.extra import libdevice\nexcept ImportError:\n"
               "    from triton.language.extra.cuda import libdevice\n\n" + KERNEL)
    assert extract_code(fenced(guarded) + fenced(USES_KERNEL)) == guarded + "\n\n" + USES_KERNEL
    chosen = "if True:\n    BLOCK = 256\nelse:\n    BLOCK = 128\n" + KERNEL
    assert extract_code(fenced(chosen) + fenced(USES_KERNEL)) == chosen + "\n\n" + USES_KERNEL


def test_a_try_or_if_that_runs_code_is_still_a_usage_snippet():
    for snippet in ("try:\n    k = 1\n    k(1)\nexcept ImportError:\n    pass\n", "if True:\n    k = 1\nelse:\n    k(1)\n"):
        assert extract_code(fenced(snippet) + fenced(USES_KERNEL)) == USES_KERNEL


CODE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_unfenced_code_between_lines_of_prose_is_the_code():
    assert extract_code("Here is the implementation.\n\n" + CODE + "\nIt reads x once.\n- one launch\n") == CODE.rstrip("\n")
    assert extract_code("Below is the full code:\n" + CODE) == CODE.rstrip("\n")


def test_unfenced_code_broken_inside_a_block_stays_broken():
    """Only unindented (prose) lines are cut from the end: a broken last line of a method is a syntax error."""
    broken = CODE.replace("return x\n", "y = x\n        return (y\n")
    assert extract_code(broken) == broken
    assert extract_code("Here:\n" + broken) == "Here:\n" + broken


def test_blocks_written_as_files_have_their_future_imports_gathered_at_the_top():
    kernel = "from __future__ import annotations\n\nimport torch\n\ndef gap(x: torch.Tensor) -> torch.Tensor:\n    return x\n"
    model = "from __future__ import annotations\n\n" + CODE.replace("pass", "def forward(self, x):\n        return gap(x)")
    code = extract_code(fenced(kernel) + "\nand\n\n" + fenced(model))
    assert code is not None and code.startswith("from __future__ import annotations\n")
    assert code.count("from __future__") == 1
    compile(code, "candidate", "exec")  # a __future__ import in the middle would be a SyntaxError


def test_a_fence_inside_a_docstring_does_not_close_the_block():
    body = CODE.replace("pass", '"""Example:\n\n        ```python\n        m = ModelNew()\n        ```\n    """')
    answer = "Here:\n\n" + fenced(body) + "\nIt reads x once.\n"
    assert extract_code(answer) == body
    # a closing fence indented like the code still closes where the text before it parses (a list item's block)
    assert extract_code("1. The code:\n\n   ```python\n   " + CODE.replace("\n", "\n   ") + "```\n") is not None


def test_a_kernels_block_ending_in_a_quick_check_lends_its_code_not_the_check():
    kernel = "import torch\n\nBLOCK = 256\n\ndef gap(x):\n    return x\n\nx = torch.randn(2, device='cuda')\nprint(gap(x))\n"
    code = extract_code(fenced(kernel) + fenced(USES_KERNEL.replace("k[(1,)]", "gap")))
    assert code is not None and "def gap(x):" in code and "BLOCK = 256" in code
    assert "randn" not in code and "print" not in code


def test_a_language_tag_on_the_line_after_the_fence_is_the_tag():
    assert extract_code("Here:\n\n```\npython\n" + CODE + "```\n") == CODE
    assert extract_code("```\nPython\n" + CODE + "```\n") == CODE


def test_a_notebook_cells_magics_and_shell_escapes_are_blanked():
    answer = fenced("%%writefile model_new.py\n" + CODE) + "Then:\n" + fenced("!pip install -q triton\n!python model_new.py\n")
    assert extract_code(answer) == "\n" + CODE
    assert extract_code(fenced("x = 1 if True else 2\n" + CODE)) == "x = 1 if True else 2\n" + CODE  # code untouched


def test_a_coding_declaration_for_anything_but_utf8_is_found():
    """Python decodes a file by its PEP 263 declaration: under utf-7 a comment's `+AAo-` is a new line of code."""
    assert declared_encoding("# -*- coding: utf-7 -*-\nimport torch\n") == (1, "utf-7")
    assert declared_encoding("#!/usr/bin/env python\n# vim: set fileencoding=latin-1 :\n") == (2, "latin-1")
    for honest in ("# -*- coding: utf-8 -*-\n", "# coding=UTF_8\n", "# -*- coding: utf8 -*-\n",
                   "import torch\n# coding: utf-7\n",  # after code: not a declaration
                   "\n\n# coding: utf-7\n"):  # third line: not a declaration
        assert declared_encoding(honest) is None, honest


def test_an_import_from_a_file_the_reply_writes_is_the_earlier_block_joined():
    """A reply written as kernels.py and model_new.py: the second imports from the first (`from kernels import gap`,
    or relative), a module nothing installed provides. The block that binds the names is joined, the import blanked."""
    kernel = "import torch\n\ndef gap(x):\n    return x\n\nBLOCK = 256\n"
    for spelled in ("from kernels import gap, BLOCK", "from .kernels import gap", "from pkg.kernels import (\n    gap,\n)"):
        model = spelled + "\n\n" + CODE.replace("pass", "def forward(self, x):\n        return gap(x)")
        code = extract_code("**kernels.py**\n" + fenced(kernel) + "**model_new.py**\n" + fenced(model))
        assert code is not None and "def gap(x):" in code and "kernels import" not in code, spelled
        compile(code, "candidate", "exec")


def test_an_import_from_a_library_or_of_names_no_block_binds_stays():
    kernel = "import torch\n\ndef gap(x):\n    return x\n"
    for spelled in ("from torch import gap", "from kernels import gap, other", "from kernels import gap as g",
                    "from kernels import *"):
        model = spelled + "\n\n" + CODE
        code = extract_code(fenced(kernel) + fenced(model))
        assert code is not None and spelled in code and "def gap(x):" not in code, spelled


def test_a_joined_block_brings_the_earlier_blocks_it_needs_as_it_runs():
    """Step 1 the imports, step 2 the kernel (no imports of its own), step 3 ModelNew importing only torch: the
    kernel's decorator reads `triton` as the module runs, so the imports block is joined too (was: NameError)."""
    imports = "import torch\nimport triton\n"
    kernel = "@triton.jit\ndef k(x):\n    pass\n\ndef gap(x):\n    return torch.empty(1)\n"
    model = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return gap(x)\n"
    code = extract_code(fenced(imports) + fenced(kernel) + fenced(model))
    assert code is not None and code.index("import triton") < code.index("@triton.jit") < code.index("class ModelNew")
    # a name the kernel block reads only inside its functions, which the final block binds, joins nothing more
    draft = "import torch\n\ndef unrelated():\n    return 1\n"
    code = extract_code(fenced(draft) + fenced(kernel.replace("@triton.jit\n", "")) + fenced(model))
    assert code is not None and "unrelated" not in code and "def gap(x):" in code


def test_an_answer_written_as_a_json_object_is_read_through_its_code_strings():
    """An LLM in JSON mode answers {"explanation": ..., "code": "import torch\\n..."}: bare, in a ```json block, as
    files in a list, or with a markdown answer in one string (was: no_code)."""
    import json

    kernel = "import torch\n\ndef gap(x):\n    return x\n"
    model = "from kernels import gap\n\n" + CODE
    for reply in (json.dumps({"explanation": "fused", "code": CODE}),
                  "Result:\n```json\n" + json.dumps({"code": CODE}, indent=2) + "\n```\n",
                  json.dumps({"files": [{"path": "kernels.py", "content": kernel},
                                        {"path": "model_new.py", "content": model}]}),
                  json.dumps({"answer": "Here:\n" + fenced(CODE) + "Done."})):
        code = extract_code(reply)
        assert code is not None and "class ModelNew" in code, reply[:40]
        compile(code, "candidate", "exec")
    assert "def gap(x):" in (extract_code(json.dumps({"a": kernel, "b": model})) or "")
    lines = extract_code(json.dumps({"code": CODE.splitlines()}))
    assert lines is not None and lines.strip() == CODE.strip()
    # JSON whose strings define no ModelNew is still no code, and a python block defining it wins over any JSON
    assert extract_code(json.dumps({"code": kernel})) is None
    assert extract_code(fenced(CODE) + "```json\n" + json.dumps({"code": CODE + "\nX = 1\n"}) + "\n```\n") == CODE


def test_code_in_xml_style_tags_is_a_block():
    """<code language="python">...</code> inside <answer>: plain, a CDATA section opening on the tag's line, or with
    entities for < > & (was: the first line lost, NameError; or a syntax error on &lt;). A .py file mentioning a
    <code> tag in a string, and a markdown answer with fences, are left as they are."""
    body = CODE.replace("return x", "return x if 1 < 2 and True else x")
    for reply in ("<answer>\n<code language=\"python\">\n" + body + "</code>\n</answer>\n",
                  "<code><![CDATA[" + body + "]]></code>\n",
                  "<response><code>" + body.replace("<", "&lt;") + "</code></response>\n"):
        code = extract_code(reply)
        assert code is not None and code.strip() == body.strip(), reply[:30]
    plain = CODE + '\nDOC = "<code>x</code>"\n'
    assert extract_code(plain) == plain
    fenced_reply = "Wrap it in <code>tags</code>? No:\n" + fenced(CODE)
    assert extract_code(fenced_reply) == CODE


def test_a_reply_after_a_prefilled_fence_is_the_code_before_its_lone_closing_fence():
    """A caller that prefills the assistant turn with ```python gets the code, a bare closing fence, then notes: the
    fence rules read that line as an opening one (was: no_code). A bare fence after an opening one is not this."""
    assert extract_code(CODE + "```\n\nThis fuses the pools.\n") == CODE
    assert extract_code("```python\n" + CODE + "```\nnotes\n```\nx = 1\n```\n") == CODE
    assert extract_code("prose only\n```\nnot code\n```\n") is None


def test_an_answer_inside_a_blockquote_is_read_without_its_markers():
    quoted = "".join("> " + line + "\n" for line in ("Answer:", "", "```python", *CODE.splitlines(), "```"))
    code = extract_code(quoted)
    assert code is not None and code.strip() == CODE.strip()
    compile(code, "candidate", "exec")


def test_a_reply_wrapped_in_an_outer_markdown_fence_is_read_inside_it():
    """A whole reply inside ````markdown (4 backticks: its own ``` fences nest) is a document shown as one (was:
    no_code); with 3 backticks the outer fence closes at its last bare fence line; a cut-off wrapper runs to the end."""
    inner = "Here is the kernel.\n\n" + fenced(CODE) + "\nIt fuses the pools.\n"
    assert extract_code("````markdown\n" + inner + "````\n") == CODE
    assert extract_code("```md\n" + inner + "```\n") == CODE
    assert extract_code("\n````markdown\n" + inner) == CODE
    assert extract_code("Sure, here it is:\n\n````markdown\n" + inner + "````\nAnything else?\n") == CODE
    assert extract_code("````markdown\nprose only\n````\n") is None


def test_a_diff_whose_new_side_is_the_whole_file_is_that_file():
    """A reply as a unified diff: a new file (--- /dev/null) or hunks covering every line is the file (was: no_code);
    hunks with gaps need the text they patch, which the reply lacks: no code, and the message says it is a diff."""
    import difflib

    new_file = "".join(difflib.unified_diff([], CODE.splitlines(True), "/dev/null", "b/model_new.py"))
    code = extract_code("```diff\n" + new_file + "```\n")
    assert code is not None and code.strip() == CODE.strip()
    old = "import torch\n\n\nimport math\nX = 1\nY = 2\nZ = 3\nclass ModelNew(torch.nn.Module):\n    pass\n"
    partial = "".join(difflib.unified_diff(old.splitlines(True), CODE.splitlines(True), n=0))
    reply = "```diff\n" + partial + "```\n"
    assert extract_code(reply) is None and "diff" in why_no_code(reply)


def test_a_closing_fence_glued_to_the_last_line_closes_the_block():
    """`    pass```` then prose (was: syntax_error on the fence); a following block is still found."""
    glued = "```python\n" + CODE.rstrip("\n") + "```\n\nNotes.\n"
    assert extract_code(glued) == CODE
    kernel = "import torch\n\ndef gap(x):\n    return x\n"
    model = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return gap(x)\n"
    code = extract_code("```python\n" + kernel.rstrip("\n") + "```\ntext\n```python\n" + model + "```\n")
    assert code is not None and "def gap(x):" in code and "class ModelNew" in code
