"""The stage ladder as data (agent/data/stages.toml): each stage's focus, template, ncu metrics and policy rules."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources

from pydantic import ValidationError

from agent.errors import UserError, unknown
from agent.schema import Stage


def parse_stages(text: str) -> tuple[list[Stage], list[str]]:
    """Validate stages TOML text into (stages in ladder order, absent Triton functions); malformed: UserError."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"stages file is not valid TOML: {e}") from e
    stages = []
    for i, entry in enumerate(data.get("stages", [])):
        try:
            stages.append(Stage(**entry))
        except (ValidationError, TypeError) as e:
            raise UserError(f"stage #{i + 1} ({entry.get('name', '?')}) is invalid: {e}") from e
    if not stages:
        raise UserError("stages file has no [[stages]] entries")
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise UserError(f"stages file names a stage twice: {names}")
    absent = data.get("absent_triton_functions", [])
    if not all(isinstance(a, str) for a in absent):
        raise UserError("absent_triton_functions must be a list of strings")
    return stages, list(absent)


@lru_cache(maxsize=1)
def _data() -> tuple[tuple[Stage, ...], tuple[str, ...]]:
    text = resources.files("agent").joinpath("data", "stages.toml").read_text(encoding="utf-8")
    stages, absent = parse_stages(text)
    return tuple(stages), tuple(absent)


def load_stages() -> list[Stage]:
    """Every stage, in ladder order (copies)."""
    return [s.model_copy(deep=True) for s in _data()[0]]


def ladder() -> tuple[str, ...]:
    """Stage names in ladder order: correctness, memory-fusion, parallelism, memory-access, tuning, algebraic."""
    return tuple(s.name for s in _data()[0])


def get_stage(name: str) -> Stage:
    """A stage by name; an unknown name is a UserError naming the choices."""
    for s in _data()[0]:
        if s.name == name:
            return s.model_copy(deep=True)
    raise unknown("stage", name, ladder())


def absent_triton_functions() -> list[str]:
    """Functions the prompt declares Triton lacks (e.g. 'tl.tanh'); the harness policy rejects calls to them."""
    return list(_data()[1])
