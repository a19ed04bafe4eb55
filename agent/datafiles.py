"""Where the agent's data files live: all of them in agent/data/ (shipped inside the wheel)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"


def data_file(name: str) -> Path:
    """agent/data/NAME."""
    return DATA / name


def load_toml(name: str) -> dict[str, Any]:
    """agent/data/NAME, parsed (callers keep what they build from it)."""
    with open(DATA / name, "rb") as f:
        return tomllib.load(f)
