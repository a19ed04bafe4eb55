"""The op vocabulary of agent/data/kernels/ops.toml, and lookup tables from torch callables, methods and module
classes to it (what recognise() matches fx nodes against)."""

from __future__ import annotations

import functools
import importlib
import tomllib
from importlib import resources
from typing import Any


@functools.cache
def _ops() -> dict[str, Any]:
    return tomllib.loads(resources.files("agent").joinpath("data/kernels/ops.toml").read_text(encoding="utf-8"))


def _resolve(dotted: str) -> Any:
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


@functools.cache
def _function_table() -> dict[int, tuple[str, str]]:
    """id(torch callable) -> (category, op name), categories: binary, unary, clamp, mean, pool, reshape, window (a max-pool
    before the mean) and reduce (a reduction the tail after the pool may apply over the channels)."""
    ops = _ops()
    table: dict[int, tuple[str, str]] = {}
    for cat in ("binary", "unary"):
        for name, spec in ops[cat].items():
            for f in spec.get("functions", []):
                table[id(_resolve(f))] = (cat, name)
    for name, spec in ops["channel_reduce"].items():
        table.update({id(_resolve(f)): ("reduce", name) for f in spec["functions"]})
    table.update({id(_resolve(f)): ("clamp", "clamp") for f in ops["clamp"]["functions"]})
    red = ops["reduce"]
    for cat, key in (("mean", "mean_functions"), ("pool", "pool_functions"), ("reshape", "reshape_functions"),
                     ("window", "window_functions")):
        for f in red[key]:
            table[id(_resolve(f))] = (cat, f)
    return table


def _method_table() -> dict[str, tuple[str, str]]:
    ops = _ops()
    table = {m: (cat, name) for cat in ("binary", "unary") for name, spec in ops[cat].items() for m in spec.get("methods", [])}
    table.update({m: ("reduce", name) for name, spec in ops["channel_reduce"].items() for m in spec["methods"]})
    table.update({m: ("clamp", "clamp") for m in ops["clamp"]["methods"]})
    table.update({m: ("mean", m) for m in ops["reduce"]["mean_methods"]})
    table.update({m: ("reshape", m) for m in ops["reduce"]["reshape_methods"]})
    return table


def _module_table() -> dict[str, tuple[str, str]]:
    ops = _ops()
    table = {m: ("unary", name) for name, spec in ops["unary"].items() for m in spec.get("modules", [])}
    table.update({m: ("pool", m) for m in ops["reduce"]["pool_modules"]})
    table.update({m: ("reshape", m) for m in ops["reduce"]["reshape_modules"]})
    table.update({m: ("window", m) for m in ops["reduce"]["window_modules"]})
    return table
