"""The candidate harness: extract, static policy, sandboxed worker, validation against an fp64 truth, timing.

    from agent.harness import EvalRequest, evaluate, evaluate_many, default_device

Importing this package is cheap (no torch, and workers importing agent.harness.job skip the pipeline).

The parent's side, one job per module: extract + mainguard (the code in an answer), policy + tells + reach + names +
pointers + annotations + environ + hooks + owned + ownself + kernelsource + kernelrules (the static allowlist), sandbox + contain +
proctree + lockwait (the wall, and the queue for a GPU not held against a candidate), limit (how long a candidate may
take), job (what a worker is asked and answers), pipeline (one evaluation end to end, and the Shared truths and
baselines), prewarm (a worker started before its job), validate +
rules + judge (the verdict from what the worker reported), evaluator (the loop's Evaluator), gpulock, settings
(agent/data/harness.toml).
The worker's side, inside the wall: worker (the modes that never import candidate code), candidate (the two that
do), workerio (what the modes share), inputs, trusted, trace + launchargs, timing, interpret (CPU mode).
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
