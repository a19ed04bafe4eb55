"""A set of answers judged together (`agent eval DIR`): the summary the field reports for a kernel benchmark.

KernelBench's measures, on each clock: the fraction of answers that are correct, the fraction that are correct and
faster than the baseline (its fast_1), and the geometric mean of the speedups of the correct ones.
"""

from __future__ import annotations

import math
from pathlib import Path

from agent.schema import EvalResult, Model, Verdict

SUFFIXES = (".md", ".py", ".txt")


def answer_files(paths: list[Path]) -> list[Path]:
    """The answers named: files as given, a directory's *.md, *.py and *.txt in name order. Raises ValueError with
    one line for a path that is missing or a directory with no answer in it."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in SUFFIXES)
            if not found:
                raise ValueError(f"{path}: a directory with no answer in it (*{', *'.join(SUFFIXES)})")
            out += found
        elif path.is_file():
            out.append(path)
        else:
            raise ValueError(f"file not found: {path}")
    return out


class ClockSummary(Model):
    faster_than_eager: float | None = None  # None: no answer was timed against it (CPU mode has no torch.compile)
    faster_than_compile: float | None = None
    geomean_vs_eager: float | None = None
    geomean_vs_compile: float | None = None


class SuiteSummary(Model):
    answers: int
    correct: int
    needs_gpu: int = 0  # answers CPU mode could not judge: counted apart, in neither the correct nor the failed
    fraction_correct: float
    verdicts: dict[str, int]
    device: ClockSummary
    latency: ClockSummary


def summarize(results: list[EvalResult]) -> SuiteSummary:
    """Counts, fractions and geometric means over `results` (fractions over the answers judged, means over correct
    ones): an answer CPU mode could not judge (needs_gpu) is counted apart."""
    unjudged = sum(r.verdict == Verdict.NEEDS_GPU for r in results)
    n = len(results) - unjudged
    correct = [r for r in results if r.verdict == Verdict.CORRECT]
    verdicts: dict[str, int] = {}
    for r in results:
        verdicts[r.verdict.value] = verdicts.get(r.verdict.value, 0) + 1
    clocks = {}
    for clock in ("device", "latency"):
        eager = [getattr(r.timing, f"{clock}_speedup_vs_eager") for r in correct if r.timing]
        compiled = [getattr(r.timing, f"{clock}_speedup_vs_compile") for r in correct if r.timing]
        eager = [x for x in eager if x]
        compiled = [x for x in compiled if x]
        # a baseline the timed answers were not compared with (torch.compile in CPU mode) has no fraction: '–',
        # not 0 %; with no timed answer at all, none was faster
        timings = [r.timing for r in results if r.timing is not None]
        timed = {b: not timings or any(getattr(t, f"{b}_{clock}_ms") is not None
                                       or getattr(t, f"{clock}_speedup_vs_{b}") is not None for t in timings)
                 for b in ("eager", "compile")}
        clocks[clock] = ClockSummary(
            faster_than_eager=sum(x > 1 for x in eager) / n if n and timed["eager"] else None,
            faster_than_compile=sum(x > 1 for x in compiled) / n if n and timed["compile"] else None,
            geomean_vs_eager=_geomean(eager), geomean_vs_compile=_geomean(compiled))
    return SuiteSummary(answers=len(results), correct=len(correct), needs_gpu=unjudged,
                        fraction_correct=len(correct) / n if n else 0.0,
                        verdicts=verdicts, device=clocks["device"], latency=clocks["latency"])


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None
