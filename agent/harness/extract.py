"""Find the candidate's code in an LLM answer: the fenced python block that defines `class ModelNew`."""

from __future__ import annotations

import ast
import re

# An opening fence with an optional language tag, its body, and a closing fence (or the end of a cut-off answer).
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)", re.S | re.M)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}
_DEFINES = re.compile(r"^\s*(class\s+ModelNew\b|ModelNew\s*=)", re.M)


def python_blocks(text: str) -> list[str]:
    """Every fenced block tagged python (or untagged), in order."""
    return [m.group(3) for m in _FENCE.finditer(text) if m.group(2).lower() in _PYTHON_TAGS]


def defines_model_new(code: str) -> bool:
    return bool(_DEFINES.search(code))


def extract_code(text: str) -> str | None:
    """The code to evaluate, or None.

    In a markdown answer: the last python block that defines ModelNew (answers often show usage snippets or
    earlier drafts first). Text without any fence is a plain .py file: the code itself, if it looks like code.
    """
    if not text.strip():
        return None
    if not _FENCE.search(text):
        return text if defines_model_new(text) or _parses(text) else None
    defining = [b for b in python_blocks(text) if defines_model_new(b)]
    return defining[-1] if defining else None


def why_no_code(text: str) -> str:
    """One line for the no_code verdict."""
    blocks = python_blocks(text) if _FENCE.search(text) else ([text] if _parses(text) else [])
    if not blocks:
        return "no ```python code block found: answer with one block that defines class ModelNew"
    n = len(blocks)
    return f"found {n} python block{'s' if n > 1 else ''} but none defines class ModelNew: the answer must define class ModelNew(nn.Module)"


def _parses(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    # prose can parse as a lone expression ("Hello") — require at least one def/class/import
    return any(isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)) for n in tree.body)
