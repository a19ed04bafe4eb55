"""The Proposer protocol every source of candidate kernels satisfies, and the per-exchange hook type."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from agent.schema import Answer

# Called once per HTTP exchange (failed ones included) with the request payload and the raw response body.
OnCall = Callable[[dict[str, Any], str], None]


@runtime_checkable
class Proposer(Protocol):
    name: str

    def propose(self, prompt: str, k: int) -> list[Answer]: ...
