"""Two more shapes of an honest answer whose code the fence rules miss, tried when they find no ModelNew:

- prefilled: the caller opened the fence for the model (an assistant turn prefilled with "```python"), so the reply is
  the code, a lone closing fence, then notes; the fence rules read that closing line as an opening one.
- quoted: the whole answer, fences included, inside a markdown blockquote (every line opening with `>`).
"""

from __future__ import annotations

import re

_BARE_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*$", re.M)
_QUOTE = re.compile(r"^[ \t]{0,3}> ?", re.M)


def before_lone_close(text: str) -> str | None:
    """The text before the first fence line, where that line is bare (no language tag) and no fence opens above it;
    None otherwise."""
    first = _BARE_FENCE.search(text)
    if first is None or re.search(r"^[ \t]*(`{3,}|~{3,})", text[:first.start()], re.M):
        return None
    head = text[:first.start()]
    return head if head.strip() else None


def unquoted(text: str) -> str | None:
    """The answer with its blockquote markers removed, where it has quoted fences; None otherwise."""
    if not re.search(r"^[ \t]{0,3}> ?[ \t]*(`{3,}|~{3,})", text, re.M):
        return None
    return _QUOTE.sub("", text)
