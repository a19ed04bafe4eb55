"""Text an answer wrote, made safe to show: nothing a candidate controls reaches a terminal as a control sequence.

An answer's code, its exception text, what it printed and the file names it came in are candidate text. Shown raw, an
ESC sequence paints a green "verdict correct" over a failure, a carriage return or backspace overwrites what the
harness wrote, and a bidi override (the "Trojan Source" trick) shows code in another order than it runs. printable()
writes every such character as a visible escape (`\\x1b`, `\\u202e`); tab and newline stay (messages and code keep
their lines). It is applied where candidate text enters the parent's verdict (agent.harness.pipeline) and to every
segment the one console draws (agent.view.terminal), so a view that forgets it still escapes.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls (0x9b is CSI on its own), the Arabic letter mark and the bidi
# marks, embeddings, overrides and isolates. A CRLF line end is a line end.
_UNSAFE = re.compile("\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    if ch == "\r\n":
        return "\n"
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character but tab and newline, and every bidi control, written as an escape."""
    return _UNSAFE.sub(_escape, text) if text else text


def is_printable(text: str) -> bool:
    """Whether printable(text) is text itself (nothing to escape)."""
    return _UNSAFE.search(text) is None
