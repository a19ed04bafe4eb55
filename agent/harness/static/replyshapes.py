"""Shapes of an honest answer whose code the fence rules miss, each tried only when they find no ModelNew:

- prefilled: the caller opened the fence for the model (an assistant turn prefilled with "```python"), so the reply is
  the code, a lone closing fence, then notes; the fence rules read that closing line as an opening one.
- quoted: the whole answer, fences included, inside a markdown blockquote (every line opening with `>`).
- a unified diff whose new side is the whole file.
- wrapped: the whole reply inside one fence tagged markdown (````` ````markdown `````, as a chat window shows a
  document), its own fences nested in it.
- a closing fence glued to the end of the last code line (used by the fence rules themselves).
"""

from __future__ import annotations

import re

_DEFINES = re.compile(r"^\s*(class\s+ModelNew\b|ModelNew\s*=)", re.M)


def defines_model_new(code: str) -> bool:
    """Whether `code` defines ModelNew (a class, or a name bound to one): what marks an answer's code."""
    return bool(_DEFINES.search(code))

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


_WRAPPER = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*(?:markdown|md)[ \t]*\n", re.I | re.M)


def unwrapped(text: str) -> str | None:
    """The reply inside an outer fence tagged markdown (the first one, after any line of prose): everything up to the
    last fence line that can close it (the same character, at least as long; a cut-off reply runs to its end). None
    where no such fence opens."""
    m = _WRAPPER.search(text)
    if m is None:
        return None
    fence = m.group(1)
    closes = [c for c in _BARE_FENCE.finditer(text, m.end())
              if c.group(1)[0] == fence[0] and len(c.group(1)) >= len(fence)]
    return text[m.end():closes[-1].start()] if closes else text[m.end():]


_DIFF_BLOCK = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*(diff|patch|udiff)\b[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M | re.I)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def diff_new_side(text: str) -> str | None:
    """A unified diff whose new side is a whole file (a new file, `--- /dev/null`, or every line of the rewritten
    seed in its hunks): that file as a python block. None where no diff block has such a side; a diff of a few
    hunks needs the text they apply to, which the reply does not hold."""
    out = None
    for m in _DIFF_BLOCK.finditer(text):
        side = _whole_new_side(m.group(3))
        if side is not None:
            out = f"```python\n{side}\n```\n"
    return out


def _whole_new_side(diff: str) -> str | None:
    lines, expect = [], 1
    for line in diff.split("\n"):
        if line.startswith(("--- ", "+++ ", "diff ", "index ", "new file mode", "\\ No newline")):
            continue
        hunk = _HUNK.match(line)
        if hunk is not None:
            if int(hunk.group(1)) not in (expect, 0):
                return None  # a gap: lines the diff does not show
            continue
        if line.startswith("+") or line.startswith(" ") or line == "":
            lines.append(line[1:])
            expect += 1
        elif not line.startswith("-"):
            return None
    return "\n".join(lines).rstrip("\n") if lines else None


def glued_close(body: str, fence: str) -> tuple[int, int] | None:
    """(where the code ends, where its line ends) of a closing fence glued to the end of a code line
    (`    return out````), the first such line in `body`; None where there is none."""
    for m in re.finditer(r"(?<=\S)[ \t]*(`{3,}|~{3,})[ \t]*$", body, re.M):
        if m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
            return m.start(), m.end()
    return None
