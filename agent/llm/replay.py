"""The replay proposer: the answers of an earlier run, in order, so a run reproduces with no network."""

from __future__ import annotations

import logging

from agent.errors import StopRun
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

    def propose(self, prompt: str, k: int) -> list[Answer]:
        """The next k recorded answers; the last call may get fewer (a run killed mid-iteration recorded fewer)."""
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        if self.remaining == 0:
            raise StopRun(
                f"replay ran out of answers: the recorded run has {len(self._answers)}, all served",
                hint="replay with no more --iterations and the same --samples as the recorded run",
            )
        if self.remaining < k:
            log.warning("replay: %d answers asked, only %d recorded ones left", k, self.remaining)
        served = self._answers[self._next : self._next + k]
        self._next += len(served)
        return served
