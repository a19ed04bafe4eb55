"""Kernel launches as a report holds them, and their aggregation into one KernelProfile per kernel name."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.ncu.metadata import (
    BLOCK,
    BLOCK_DIMS,
    CLASSIFY_INPUTS,
    DURATION,
    GPU_NAME,
    GRID_DIMS,
    SM_COUNT,
    meta,
)
from agent.schema import KernelProfile, Number, Profile, RuleResult


@dataclass
class _Launch:
    """One kernel launch as a report holds it (before launches of the same name are aggregated)."""

    name: str
    values: dict[str, Number | str] = field(default_factory=dict)
    rules: list[RuleResult] = field(default_factory=list)

    @property
    def duration(self) -> float:
        v = self.values.get(DURATION)
        return float(v) if isinstance(v, (int, float)) else 0.0


def _wanted_names(wanted: list[str]) -> list[str]:
    """What to read from a launch: the asked-for names, their aliases, and what aggregation and classify need."""
    names = dict.fromkeys([*wanted, *CLASSIFY_INPUTS, BLOCK, GPU_NAME, *SM_COUNT, *GRID_DIMS, *BLOCK_DIMS])
    for name in list(names):
        for alias in meta().aliases.get(name, []):
            names.setdefault(alias, None)
    return list(names)


def _resolve_aliases(values: dict[str, Number | str]) -> None:
    """Fill a missing name from the first alias present (in place)."""
    for name, aliases in meta().aliases.items():
        if name not in values:
            for alias in aliases:
                if alias in values:
                    values[name] = values[alias]
                    break


def _sm_count(values: dict[str, Number | str]) -> int | None:
    for n in SM_COUNT:
        v = values.get(n)
        if isinstance(v, (int, float)) and v > 0:
            return int(v)
    return None


def _combine(name: str, launches: list[_Launch]) -> Number | str | None:
    present = [x for x in launches if name in x.values]
    if not present:
        return None
    longest = max(present, key=lambda x: x.duration)
    first = longest.values[name]
    if name.startswith(("launch__", "device__")) or isinstance(first, str) or len(present) == 1:
        return first
    nums = [x.values[name] for x in present if isinstance(x.values[name], (int, float))]
    if len(nums) != len(present):
        return first
    if name.endswith(".sum"):
        return sum(nums)  # type: ignore[arg-type]
    if name.endswith(".max"):
        return max(nums)
    if name.endswith(".min"):
        return min(nums)
    weights = [x.duration for x in present]
    if sum(weights) <= 0:
        weights = [1.0] * len(present)
    return sum(float(v) * w for v, w in zip(nums, weights)) / sum(weights)


def _dims(values: dict[str, Number | str], names: tuple[str, ...]) -> list[int] | None:
    dims = [values.get(n) for n in names]
    return [int(d) for d in dims] if all(isinstance(d, (int, float)) for d in dims) else None  # type: ignore[arg-type]


def aggregate(launches: list[_Launch], wanted: list[str]) -> Profile:
    """Group launches by kernel name (first-run order) and aggregate them as read_report describes."""
    groups: dict[str, list[_Launch]] = {}
    for launch in launches:
        groups.setdefault(launch.name, []).append(launch)
    kernels: dict[str, KernelProfile] = {}
    for name, group in groups.items():
        longest = max(group, key=lambda x: x.duration)
        values: dict[str, Number] = {}
        for metric in dict.fromkeys([*wanted, *CLASSIFY_INPUTS, *SM_COUNT]):
            v = _combine(metric, group)
            if isinstance(v, (int, float)):
                values[metric] = v
        kernels[name] = KernelProfile(
            name=name, launches=len(group), grid=_dims(longest.values, GRID_DIMS),
            block=_dims(longest.values, BLOCK_DIMS), metrics=values, rules=longest.rules,
        )
    return Profile(kernels=kernels)
