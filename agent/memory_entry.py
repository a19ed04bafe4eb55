"""One candidate as a run's memory keeps it (agent.memory): the type proposers read (agent.protocols), and its line."""

from __future__ import annotations

from pydantic import Field

from agent.schema import Candidate, Model, Objective, Verdict

MESSAGE_CHARS = 100  # a failure's first line at most


class MemoryEntry(Model):
    """One candidate of the run, as the memory keeps it."""

    candidate: str
    iteration: int
    parent: str | None = None
    stage: str
    idea: str
    verdict: Verdict
    ms: float | None = Field(default=None, description="on the run's objective clock (correct candidates)")
    parent_ms: float | None = Field(default=None, description="its parent's time on the same clock")
    message: str = Field(default="", description="a failure's first line")
    finding: str | None = None

    @classmethod
    def of(cls, c: Candidate, objective: Objective, parent_ms: float | None) -> MemoryEntry:
        t = c.result.timing if c.result.verdict == Verdict.CORRECT else None
        first = (c.result.message or "").strip().splitlines()
        return cls(candidate=c.id, iteration=c.iteration, parent=c.parent, stage=c.stage, idea=c.idea or "?",
                   verdict=c.result.verdict, ms=t.clock(objective)[0] if t else None, parent_ms=parent_ms,
                   message=clip(first[0], MESSAGE_CHARS) if first and c.result.verdict != Verdict.CORRECT else "",
                   finding=c.finding)

    def line(self, run_id: str) -> str:
        """`i2-c1 from i1-c2 (memory-fusion), for small-grid: "idea" → correct, 0.512 ms, 1.31x faster than its
        parent`: ids without the run's prefix."""
        parent = f" from {short_id(self.parent, run_id)}" if self.parent else ""
        aim = f", for {self.finding}" if self.finding else ""
        head = f'{short_id(self.candidate, run_id)}{parent} ({self.stage}){aim}: "{self.idea}" → {self.verdict}'
        if self.verdict != Verdict.CORRECT:
            return f"{head}: {self.message}" if self.message else head
        if self.ms is None:
            return head
        out = f"{head}, {self.ms:.4g} ms"
        if self.parent_ms:
            ratio = self.parent_ms / self.ms
            out += (f", {ratio:.2f}x faster than its parent" if ratio >= 1
                    else f", {1 / ratio:.2f}x slower than its parent")
        return out


def short_id(candidate: str, run_id: str) -> str:
    """'RUN-i3-c1' -> 'i3-c1' (the run is the prompt's own)."""
    return candidate[len(run_id) + 1:] if candidate.startswith(run_id + "-") else candidate



def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:") + "…"
