"""An answer given as a JSON object instead of markdown: an LLM called in JSON mode (or one that reads "return the
code" as a structured reply) answers `{"explanation": "...", "code": "import torch\\n..."}`, bare or inside a ```json
fence. The code is one of its strings, escaped; the text in that string is the answer, and is extracted as any other
(it may itself hold fences). Nothing is granted: the string is only text, judged as if it had been sent plainly.
"""

from __future__ import annotations

import json
import re

from agent.harness.static.replyshapes import defines_model_new

_JSON_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*(json|json5|jsonc)?[ \t]*\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M | re.I)
_MAX_STRINGS = 10_000  # a reply is a few fields; bound the walk over a hostile document all the same


def as_markdown(text: str) -> str | None:
    """A JSON answer as the markdown it stands for, or None where the answer holds no JSON string defining ModelNew.
    A string that is itself markdown (fences inside) is that answer; otherwise each string of code becomes a python
    block, in document order (a reply as files, {"kernels.py": ..., "model_new.py": ...}, keeps its helpers)."""
    found = _code_strings(text)
    defining = [s for s in found if _defines(s)]
    if not defining:
        return None
    last = defining[-1]
    if "```" in last or "~~~" in last:
        return last
    return "\n".join(f"```python\n{s.rstrip()}\n```\n" for s in found if "```" not in s and "~~~" not in s)


def _code_strings(text: str) -> list[str]:
    """The strings of a JSON answer (the whole text, or its ```json blocks) that look like code, in document order;
    empty where the answer holds no JSON."""
    docs = [text.strip()] + [m.group(3) for m in _JSON_FENCE.finditer(text)]
    out: list[str] = []
    for doc in docs:
        if not doc.startswith(("{", "[")):
            continue
        try:
            value = json.loads(doc)
        except (ValueError, RecursionError):
            continue
        out += [s for s in _strings(value) if _looks_like_code(s)]
    return out


def _looks_like_code(s: str) -> bool:
    return _defines(s) or bool(_CODE_LINE.search(s))


_CODE_LINE = re.compile(r"^(import \w|from [\w.]+ import |@triton\.jit|def \w|class \w)", re.M)


def _defines(s: str) -> bool:
    return defines_model_new(s)


def _strings(value: object) -> list[str]:
    out: list[str] = []
    stack = [value]
    while stack and len(out) < _MAX_STRINGS:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack += reversed(list(v.values()))
        elif isinstance(v, list) and v and all(isinstance(x, str) for x in v) and _defines("\n".join(v)):
            out.append("\n".join(v))  # the code as a list of its lines ({"code": ["import torch", ...]})
        elif isinstance(v, list):
            stack += reversed(v)
    return out
