"""agent.harness.worker.candidate: how the worker reads the candidate's module."""

from __future__ import annotations

import types

from agent.harness.worker.candidate import model_new_of


def test_modelnew_is_read_from_the_modules_namespace_never_through_its_getattr():
    """A module-level __getattr__ (PEP 562) answers names the module lacks: the harness's lookup must not run it."""
    module = types.ModuleType("candidate")
    calls: list[str] = []
    module.__getattr__ = lambda name: calls.append(name) or type(name, (), {})  # type: ignore[attr-defined]
    assert model_new_of(module) is None and calls == []
    module.ModelNew = int  # type: ignore[attr-defined]
    assert model_new_of(module) is int
