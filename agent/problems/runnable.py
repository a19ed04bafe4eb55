"""Which derived size sets of a foreign problem its own reference can run at, on the device a command runs on: the
others are skipped, each with a one-line notice, before any worker starts (the harness would otherwise stop on
"the reference ... failed").

A derived size can be one the Model cannot take: a pool window larger than the derived plane, a shape written as
numbers (`bias_shape = (16, 1, 1)`) that no longer matches the resized channels, a group count that no longer divides
them. CPU mode's sets are small by construction: each runs one real forward on the CPU. The GPU's are not (a
16x64x512x512 input): each runs on the meta device (shapes only, no data, no memory), once the file's own sizes are
seen to run there; a file whose own sizes do not (a forward that reads a value, a module built for CUDA) keeps its
GPU sets unchecked. Built-in problems are not checked: their sizes are written out in agent/data/problems.toml.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

from agent.errors import UserError
from agent.schema import ProblemSpec, SizeOverrides, SizeSet

log = logging.getLogger(__name__)


def _runs(path: Path, overrides: SizeOverrides, device: Literal["meta", "cpu"]) -> str | None:
    """Why the problem's Model cannot run one forward at these sizes on `device` (None: it can)."""
    import torch

    from agent.problems.source import load_module

    try:
        module = load_module(path, overrides)  # a file may refuse a size itself (an assert at import)
        with torch.device(device), torch.no_grad():
            module.Model(*module.get_init_inputs())(*module.get_inputs())
    except Exception as e:  # the user's Model at a size we chose: a reason, not a crash
        return _first_line(f"{type(e).__name__}: {e}")
    return None


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _keep(problem: ProblemSpec, sets: list[SizeSet], device: Literal["meta", "cpu"]) -> list[SizeSet]:
    kept = []
    for s in sets:
        why = _runs(problem.path, s.overrides, device)
        if why is None:
            kept.append(s)
            continue
        sizes = ", ".join(f"{k}={v}" for k, v in s.overrides.items())
        log.warning("problem %s: size %r (%s) skipped: its reference cannot run there: %s", problem.name, s.label,
                    sizes, why)
    return kept


def runnable(problem: ProblemSpec, device: Literal["cuda", "cpu"]) -> ProblemSpec:
    """`problem` with the size sets of `device` it cannot run at removed; a UserError when none is left."""
    if device == "cpu":
        kept = _keep(problem, problem.cpu_sizes, "cpu")
        if not kept:
            raise UserError(f"problem {problem.name}: its reference runs at none of the sizes derived for CPU mode "
                            "(the notices above say why)", "a shape written as numbers does not follow the size "
                            "globals: write it from them, e.g. bias_shape = (out_channels, 1, 1)")
        return problem.model_copy(update={"cpu_sizes": kept})
    own = _runs(problem.path, {}, "meta")
    if own is not None:
        log.debug("problem %s does not run on the meta device (%s): its GPU sizes are not checked", problem.name, own)
        return problem
    # the file's own sizes ran just above: only the derived ones are tried
    return problem.model_copy(update={"sizes": [s for s in problem.sizes if not s.overrides or
                                                _keep(problem, [s], "meta")]})
