"""The candidate harness: extract, static policy, sandboxed worker, validation against an fp64 truth, timing.

    from agent.harness import EvalRequest, evaluate, evaluate_many, default_device

Importing this package is cheap (no torch, and workers importing agent.harness.job skip the pipeline).

Rooms (docs/architecture.md): static/ (the answer's code and the static policy, before anything runs), wall/ (the
sandbox, its limits, the process tree, the GPU's lock), worker/ (everything that runs inside the sandbox; it imports
nothing of the parent's side), judge/ (the verdict from what a worker reported). At the top, the parent's
orchestration: pipeline (one evaluation end to end), evaluator (the loop's Evaluator), job (what a worker is asked and
answers), runner (run_job: the one way a job runs in the wall), shared + cache (truths and baselines), prewarm,
preflight, settings (agent/data/harness.toml).
"""

from __future__ import annotations

from typing import Any

__all__ = ["EvalRequest", "HarnessError", "Shared", "default_device", "evaluate", "evaluate_many", "prewarm_for"]


def __getattr__(name: str) -> Any:
    if name == "HarnessError":
        from agent.errors import HarnessError

        return HarnessError
    if name in __all__:
        from agent.harness import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'agent.harness' has no attribute {name!r}")
