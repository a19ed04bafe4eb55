"""Trials whose truth varies: where a problem's output saturates on the drawn inputs, inputs that keep it in range.

A problem that ends in tanh, sigmoid or a clamp of a sum over many rows gives the same output for any input that is
large enough: every element of the truth sits at the bound, and an answer that sums 32 rows of 4,096 is as right as
one that sums them all. Such a trial tests nothing. Before the round's trials are planned, the parent runs the
problem's Model (fp64, on its own CPU, at CPU mode's small sizes) on each size's distributions and measures how
much the truth varies across its elements (its range, and how many elements lie away from its ends); at a size
where it hardly varies on every distribution, inputs drawn smaller (`randn*S`, S = 0.1, 0.01, ...) keep a saturating
function in its linear range: the first scale at which the truth varies gets one more trial at that size. A truth
that varies at no scale (a softmax's sum, an output set by a bias) gets none: a trial there could not tell answers
apart either.

CPU mode only: the GPU's sizes are too large to run in the parent, and the reference worker runs there.
"""

from __future__ import annotations

import logging
from typing import Any

from agent.harness.job import TrialSpec, trial_seed
from agent.schema import ProblemSpec, SizeSet

log = logging.getLogger(__name__)

FLAT = 1e-3  # a relative range under ten times the tolerance floor: a wrong constant near the truth would pass
ENDS = 0.01  # within this share of the range of either end, an element sits at a bound
INSIDE = 0.1  # the share of elements (of 8 or more) that must lie inside the ends
SCALES = (1e-1, 1e-2, 1e-3, 1e-4)


def varies(outputs: list[Any]) -> bool | None:
    """Whether every output of two elements or more varies: its range at least FLAT of its largest magnitude and,
    with 8 elements or more, a tenth of them inside its ends (a tanh at -1 and 1, a clamp at 0 and 1 does not);
    None where no output has two elements."""
    found = []
    for t in outputs:
        if t.numel() < 2:
            continue
        top, low, high = float(t.abs().max()), float(t.min()), float(t.max())
        if top == 0 or (high - low) / top < FLAT:
            found.append(False)
            continue
        band = ENDS * (high - low)
        inside = ((t > low + band) & (t < high - band)).double().mean()
        found.append(t.numel() < 8 or float(inside) >= INSIDE)
    return all(found) if found else None


def _truth(model: Any, module: Any, distribution: str) -> list[Any]:
    import torch

    from agent.harness.worker.inputs import flatten, is_float, make_inputs

    inputs = make_inputs(module, distribution, 0, "cpu")
    with torch.no_grad():
        return flatten(model(*[x.double() if is_float(x) else x for x in inputs]))[1]


def scales(problem: ProblemSpec, sizes: list[SizeSet], distributions: list[str]) -> list[tuple[int, str]]:
    """(size index, "randn*S") for each size whose truth hardly varies on all its distributions and varies at S."""
    from agent.harness.worker.inputs import build
    from agent.problems import load_module

    out: list[tuple[int, str]] = []
    for i, size in enumerate(sizes):
        try:
            module = load_module(problem.path, size.overrides)
            model = build(module, module.Model, 0, "cpu").double()
            drawn = [varies(_truth(model, module, d)) for d in size.distributions or distributions]
            if any(v is not False for v in drawn):  # varies on one draw at least, or cannot (a scalar)
                continue
            for scale in SCALES:
                if varies(_truth(model, module, f"randn*{scale:g}")):
                    out.append((i, f"randn*{scale:g}"))
                    break
        except Exception as e:  # the reference worker says what is wrong with a Model that fails here
            log.debug("saturation probe of %s at %s: %s", problem.name, size.label, e)
    return out


def varied_trials(found: list[tuple[int, str]], sizes: list[SizeSet], distributions: list[str], seed: int,
                  first: int) -> list[TrialSpec]:
    """The trials `scales` found (ids from `first`), on fresh buffers, traced as every trial is."""
    return [TrialSpec(id=first + k, size=i, distribution=d, buffer="fresh", trace=True,
                      seed=trial_seed(seed, i, len(sizes[i].distributions or distributions)))
            for k, (i, d) in enumerate(found)]
