"""The replay proposer: the answers of an earlier run, in order, so a run reproduces with no network."""

from __future__ import annotations

import logging

from agent.protocols import Proposal, ProposalContext
from agent.schema import Answer

log = logging.getLogger(__name__)


class ReplayProposer:
    """Serves the answers of an earlier run in the order they were recorded, K per call."""

    def __init__(self, answers: list[Answer], name: str = "replay") -> None:
        self.name = name
        self._answers = list(answers)
        self._next = 0

    @property
    def remaining(self) -> int:
        return len(self._answers) - self._next

    def propose(self, ctx: ProposalContext) -> Proposal:
        """The next k recorded answers; the last call may get fewer (a run killed mid-iteration recorded fewer)."""
        if self.remaining == 0:
            return Proposal(stop=f"replay ran out of answers: the recorded run has {len(self._answers)}, all served "
                                 "(replay with no more --iterations and the same --samples as the recorded run)")
        if self.remaining < ctx.k:
            log.warning("replay: %d answers asked, only %d recorded ones left", ctx.k, self.remaining)
        served = self._answers[self._next : self._next + ctx.k]
        self._next += len(served)
        return Proposal(answers=served)
