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

Here in the parent at CPU mode's sizes; on a GPU the full sizes are too large for the parent, and a sandboxed worker
measures them there (mode `saturation`, agent.harness.worker.saturation; agent.harness.shared runs and caches it).
"""

from __future__ import annotations

import logging

from agent.harness.job import TrialSpec, trial_seed
from agent.harness.worker.saturation import scales as worker_scales
from agent.schema import ProblemSpec, SizeSet

log = logging.getLogger(__name__)


def scales(problem: ProblemSpec, sizes: list[SizeSet], distributions: list[str]) -> list[tuple[int, str]]:
    """(size index, "randn*S") for each size whose truth hardly varies on all its distributions and varies at S,
    measured here in the parent (CPU mode's sizes; a GPU's in a worker: agent.harness.shared)."""
    from agent.problems import load_module

    return worker_scales(lambda i: load_module(problem.path, sizes[i].overrides),
                         [size.distributions or distributions for size in sizes], "cpu",
                         lambda i, e: log.debug("saturation probe of %s at %s: %s", problem.name, sizes[i].label, e))


def varied_trials(found: list[tuple[int, str]], sizes: list[SizeSet], distributions: list[str], seed: int,
                  first: int) -> list[TrialSpec]:
    """The trials `scales` found (ids from `first`), on fresh buffers, traced as every trial is."""
    return [TrialSpec(id=first + k, size=i, distribution=d, buffer="fresh", trace=True,
                      seed=trial_seed(seed, i, len(sizes[i].distributions or distributions)))
            for k, (i, d) in enumerate(found)]
