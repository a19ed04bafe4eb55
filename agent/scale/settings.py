"""How agent.scale lays out evaluation workers: agent/data/scale.toml."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from agent.datafiles import load_toml


class ScaleSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    grace_s: float


@lru_cache(maxsize=1)
def scale_settings() -> ScaleSettings:
    """agent/data/scale.toml, parsed once."""
    return ScaleSettings.model_validate(load_toml("scale.toml"))


def slots_per_gpu() -> int:
    """Workers per GPU: the harness's gpu_slots (candidates at once on one GPU, behind its lock)."""
    from agent.harness.settings import settings

    return settings().sandbox.gpu_slots
