"""Prices per model (agent/data/prices.toml), cheap token estimates, and the --budget-usd guard."""

from __future__ import annotations

import math
import re
import tomllib
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from agent.schema import Usage


class Price(BaseModel):
    """USD per 1M tokens for one model; `reasoning` models take max_completion_tokens and no temperature."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0, description="USD per 1M prompt tokens")
    output: float = Field(ge=0, description="USD per 1M completion tokens")
    reasoning: bool = False

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


@cache
def load_prices() -> dict[str, Price]:
    """The price table shipped in agent/data/prices.toml, by model name."""
    text = resources.files("agent").joinpath("data/prices.toml").read_text(encoding="utf-8")
    return {name: Price.model_validate(entry) for name, entry in tomllib.loads(text)["models"].items()}


# Dated snapshots: "gpt-4o-2024-08-06", "gpt-4-0613".
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{4})$")


def price_for(model: str) -> Price | None:
    """The model's price: exact name first, then its name without a snapshot date; None if unknown."""
    prices = load_prices()
    return prices.get(model) or prices.get(_SNAPSHOT.sub("", model))


def estimate_tokens(text: str) -> int:
    """A cheap token count for budgeting: characters / 4, rounded up (no tokenizer dependency)."""
    return math.ceil(len(text) / 4)


class BudgetExceeded(Exception):
    """The next call could spend more than what is left of --budget-usd (the proposer turns it into Proposal.stop)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Budget(BaseModel):
    """Money left for LLM calls: check the worst case before a call, charge the real usage after it."""

    limit_usd: float | None = Field(default=None, ge=0, description="None: no limit")
    spent_usd: float = 0.0

    @property
    def remaining_usd(self) -> float | None:
        return None if self.limit_usd is None else self.limit_usd - self.spent_usd

    def check(self, estimate_usd: float) -> None:
        """Raise BudgetExceeded if a call costing up to `estimate_usd` could overrun the limit."""
        if self.limit_usd is not None and self.spent_usd + estimate_usd > self.limit_usd:
            raise BudgetExceeded(
                f"budget ${self.limit_usd:.2f} would be exceeded: ${self.spent_usd:.4f} spent, the next call could "
                f"cost up to ${estimate_usd:.4f} (raise --budget-usd, or lower --samples or max_tokens)")

    def charge(self, usage: Usage) -> None:
        self.spent_usd += usage.cost_usd
