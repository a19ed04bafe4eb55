"""The per-exchange hook of the LLM proposers (the Proposer protocol itself lives in agent.protocols)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Called once per HTTP exchange (failed ones included) with the request payload and the raw response body.
OnCall = Callable[[dict[str, Any], str], None]
