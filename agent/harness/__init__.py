"""The candidate harness: extract, static policy, sandboxed worker, validation against an fp64 truth, timing.

    from agent.harness import EvalRequest, evaluate, evaluate_many, default_device

Importing this package is cheap (no torch, and workers importing agent.harness.job skip the pipeline).
"""

from __future__ import annotations

from typing import Any

__all__ = ["EvalRequest", "HarnessError", "Shared", "default_device", "evaluate", "evaluate_many"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from agent.harness import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'agent.harness' has no attribute {name!r}")
