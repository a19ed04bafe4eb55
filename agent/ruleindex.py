"""The index of the judge's rules (agent/data/rules.toml): a refusal's message ends with its rule's id in brackets,
and the index says where that rule lives and what it refuses, so a verdict leads to its code in one step."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from pydantic import Field

from agent.datafiles import load_toml
from agent.errors import UserError
from agent.schema import Model

_TAG = re.compile(r"\[([a-z][a-z0-9-]*)\]")


class Rule(Model):
    """One rule: its id, the room that decides it, the file that does, the data it reads, what it refuses."""

    id: str
    room: Literal["static", "judge", "loop"]
    file: str = Field(description="the module that decides it, from the repository's root")
    data: str | None = Field(default=None, description="the data file it reads, where the rule is data")
    refuses: str


@lru_cache(maxsize=1)
def rules() -> dict[str, Rule]:
    """Every rule, by id, in the index's order."""
    return {rid: Rule(id=rid, **entry) for rid, entry in load_toml("rules.toml").items()}


def get_rule(rule_id: str) -> Rule:
    """The rule `rule_id`; a UserError naming the known ids if there is none."""
    found = rules().get(rule_id)
    if found is None:
        raise UserError(f"no rule {rule_id!r}", hint="known: " + ", ".join(rules()))
    return found


def rules_named(message: str) -> list[Rule]:
    """The rules a verdict's message names (its bracketed ids the index knows), in order, once each."""
    seen: dict[str, Rule] = {}
    for rid in _TAG.findall(message or ""):
        if rid in rules() and rid not in seen:
            seen[rid] = rules()[rid]
    return list(seen.values())
