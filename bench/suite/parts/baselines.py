"""Part 2 fallback: the baselines and the seed alone."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from parts.common import _problem, _stage, first_line, left, profile_summary

# ---------------------------------------------------------------- part 2 fallback: the seed alone


def part_baselines(ctx: dict, deadline: float, save: Callable[[dict], None]) -> dict:
    """Only when the memory-fusion run recorded no iteration 0: the seed through the harness, then ncu."""
    from agent.harness import EvalRequest, evaluate
    from agent.problems import starting_code

    problem, stage = _problem(), _stage()
    cache = Path(ctx["work"]) / "runs" / "candidates" / ".cache"
    t0 = time.monotonic()
    r = evaluate(EvalRequest(source=starting_code(problem), problem=problem, stage=stage, device=ctx["device"],
                             cache_dir=cache, seed=1, timeout_s=max(30.0, left(deadline) - 5)))
    t = r.timing
    seed: dict[str, Any] = {"id": "seed (standalone)", "iteration": 0, "verdict": str(r.verdict),
                            "message": first_line(r.message), "duration_s": time.monotonic() - t0, "profile": None}
    if t is not None:
        seed.update(ms=t.candidate_ms, spread_pct=t.candidate_spread_pct, eager_ms=t.eager_ms,
                    eager_spread_pct=t.eager_spread_pct, compile_ms=t.compile_ms, compile_spread_pct=t.compile_spread_pct)
    data = {"seed_summary": seed, "candidates": [seed]}
    save(data)
    if ctx["device"] == "cuda" and left(deadline) > 20:
        from agent.profiler import ProfileRequest, profile

        prof = profile(ProfileRequest(code=r.code or "", problem=problem, stage=stage, metric_set="stage",
                                      out=Path(ctx["work"]) / "baselines_seed.ncu-rep", timeout_s=left(deadline) - 3))
        seed["profile"] = profile_summary(prof)
    return data


