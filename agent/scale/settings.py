"""How agent.scale lays out evaluation workers: agent/data/scale.toml."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict


class ScaleSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slots_per_gpu: int
    grace_s: float


@lru_cache(maxsize=1)
def scale_settings() -> ScaleSettings:
    """agent/data/scale.toml, parsed once."""
    with open(Path(__file__).parent.parent / "data" / "scale.toml", "rb") as f:
        return ScaleSettings.model_validate(tomllib.load(f))
