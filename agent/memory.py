"""Memory: what a run has tried on its problem and what came of it, one short entry per candidate.

An entry holds the idea (a few words: agent.schema.Answer.idea where the proposer states it, as the offline proposer
does, else derived from the answer by `idea_of`), the verdict, the time on the run's clock next to its parent's, and
the finding its prompt asked it to address. Entries are built from recorded candidates alone, so a resumed run (a new
process) remembers exactly what the killed one had tried. The prompt shows the newest few as its [MEMORY] block
(`lines`); the offline proposer reads all of them (agent.protocols.ProposalContext.memory) and never proposes an idea
twice.
"""

from __future__ import annotations

import re

from agent.memory_entry import MemoryEntry, clip, short_id
from agent.schema import Answer

__all__ = ["IDEA_CHARS", "PROMPT_ENTRIES", "MemoryEntry", "idea_of", "lines", "short_id"]

# The [MEMORY] block shows this many entries, newest last: a round or three of ideas without drowning the prompt.
PROMPT_ENTRIES = 12
IDEA_CHARS = 120  # an idea's length at most; a derived one is cut at a word


def lines(entries: list[MemoryEntry], run_id: str, limit: int = PROMPT_ENTRIES) -> list[str]:
    """The [MEMORY] block's lines: the newest `limit` entries, oldest first, after a count of those left out."""
    shown = entries[-limit:] if limit else []
    left = len(entries) - len(shown)
    return ([f"({left} earlier attempt{'s' if left != 1 else ''} not shown)"] if left else []) + \
        [e.line(run_id) for e in shown]


# ---------------------------------------------------------------- an answer's idea

_FENCE = re.compile(r"```")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_KERNEL = re.compile(r"@triton\.(?:jit|autotune)[^\n]*\n(?:@[^\n]*\n)*\s*def\s+(\w+)")
_PARAM = re.compile(r"\b([A-Z][A-Z0-9_]*|num_warps|num_stages)\s*=\s*(\d+)\b")


def idea_of(answer: Answer | None, code: str | None) -> str:
    """What an answer tries, in at most IDEA_CHARS, the same for the same answer: the proposer's own words where it
    gave them; else the answer's first markdown heading or first sentence before its code; then its kernels and the
    constants it launches them with (from the evaluated code)."""
    if answer is not None and answer.idea:
        return clip(answer.idea, IDEA_CHARS)
    prose = _FENCE.split(answer.text, 1)[0] if answer is not None else ""
    heading = _HEADING.search(prose)
    lead = heading.group(1) if heading else _first_sentence(prose)
    launch = _launch(code or "")
    if lead and launch:
        return clip(f"{clip(lead, IDEA_CHARS - min(len(launch), 50) - 3)} · {launch}", IDEA_CHARS)
    return clip(lead or launch or "(no description, no code)", IDEA_CHARS)


def _first_sentence(prose: str) -> str:
    text = " ".join(prose.split())
    m = re.search(r"(?<=[.!?])\s", text)
    return (text[:m.start()] if m else text).strip()


def _launch(code: str) -> str:
    """'gap_rowsum_kernel BLOCK=2048 num_warps=8': the kernels, and the first few integer constants passed by name."""
    kernels = list(dict.fromkeys(_KERNEL.findall(code)))
    params = list(dict.fromkeys(f"{k}={v}" for k, v in _PARAM.findall(code)))[:4]
    return " ".join([", ".join(kernels), *params]).strip() if kernels else ""
