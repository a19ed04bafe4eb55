"""Proposers: where candidate kernels come from (an OpenAI-compatible server, or a recorded run).

A proposer turns one prompt into K answers. `OpenAIProposer` asks any OpenAI-compatible chat
completions server (OpenAI itself, vLLM, Ollama, LM Studio) through the `openai` SDK, whose own
`max_retries`/`timeout` do the backoff on 429, 5xx and timeouts; it prices every call from
`agent/data/prices.toml` and refuses a call that could overrun the budget. `ReplayProposer`
serves the answers of an earlier run, in order, so a run reproduces with no network.
The offline proposer lives in `agent.offline`; all satisfy `agent.protocols.Proposer`.

Modules: `base` (OnCall), `pricing` (prices, token estimates, Budget),
`openai_proposer` (OpenAIConfig, OpenAIProposer), `openai_errors` (SDK errors to UserError lines),
`replay` (ReplayProposer). Nothing here imports the `openai` SDK (or torch) at import time.
"""

from agent.llm.base import OnCall
from agent.llm.openai_proposer import OPENAI_DEFAULT_URL, OpenAIConfig, OpenAIProposer
from agent.llm.pricing import (
    Budget,
    BudgetExceeded,
    Price,
    estimate_tokens,
    load_prices,
    price_for,
)
from agent.llm.replay import ReplayProposer

__all__ = [
    "OPENAI_DEFAULT_URL",
    "Budget",
    "BudgetExceeded",
    "OnCall",
    "OpenAIConfig",
    "OpenAIProposer",
    "Price",
    "ReplayProposer",
    "estimate_tokens",
    "load_prices",
    "price_for",
]
