"""An answer that puts its code in XML-style tags instead of fences: `<code language="python">...</code>` (often
inside <answer> or <response>), the body as a CDATA section or with `<`, `>` and `&` escaped as entities. Each such
element becomes the fenced block it stands for, so extraction treats it as any block; text outside stays prose.
Without this, unfenced extraction started at the first line that opens a module, and a body written on the tag's own
line (`<code><![CDATA[import torch`) lost that line (NameError: torch).
"""

from __future__ import annotations

import html
import re

_ELEMENT = re.compile(r"<(code|python|source)\b[^>\n]*>(.*?)</\1\s*>", re.S | re.I)
_CDATA = re.compile(r"^\s*<!\[CDATA\[(.*?)\]\]>\s*$", re.S)


def as_markdown(text: str) -> str:
    """`text` with each code element replaced by a fenced block; unchanged where it has none (or has fences: a
    markdown answer that mentions a `<code>` tag in its prose is markdown)."""
    if "```" in text or "~~~" in text or not _ELEMENT.search(text):
        return text
    return _ELEMENT.sub(lambda m: f"\n```python\n{_body(m.group(2)).strip(chr(10))}\n```\n", text)


def _body(inner: str) -> str:
    cdata = _CDATA.match(inner)
    if cdata is not None:
        return cdata.group(1)
    return html.unescape(inner) if re.search(r"&(lt|gt|amp|quot|#\d+);", inner) else inner
