"""What a finding is: one fact the diagnosis (agent.diagnosis) found about a kernel, as a prompt's [DIAGNOSIS] line
shows it and a proposer reads it (agent.protocols.ProposalContext.findings)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent.schema import Model

# Remedies the offline proposer (and a prompt) can act on.
Remedy = Literal["more-programs", "more-bytes-in-flight", "fewer-launches", "fewer-bytes", "contiguous-loads",
                 "fewer-registers", "conflict-free-shared", "library-layout"]


class Finding(Model):
    """One fact about a kernel, with its evidence and what it suggests."""

    kind: str = Field(description="which analyzer, and what it found: 'small-grid', 'low-dram', ...")
    kernel: str = Field(description="the kernel it is about ('' for the whole forward)")
    evidence: str = Field(description="one line with the numbers")
    figures: dict[str, float] = Field(default_factory=dict)
    direction: str = Field(description="what it suggests doing, in a few words")
    remedy: Remedy | None = None
    gain_pct: float | None = Field(default=None, description="estimated share of the time that could go")
    source: Literal["agent", "ncu"] = "agent"
    detail: str = Field(default="", description="what kind of it, where the graph tells them apart: occupancy's "
                                                "limiter ('registers', 'programs per SM', 'launch')")
    folded: list[Finding] = Field(default_factory=list, description="the symptoms this cause explains "
                                                                    "(agent.diagnosis.graph), without gains of their own")
