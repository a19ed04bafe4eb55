"""`--precision kernelbench`: KernelBench's own correctness check, so that a verdict can be compared with published
results. fp32 (the default) stays stricter on purpose: KernelBench's check lets through what the default refuses
(a masked-lane softmax bug at a size it never draws, a small-size GELU approximation, fp16 stores).

What KernelBench does (ScalingIntelligence/KernelBench, src/eval.py, run_and_check_correctness; versions 0 and 0.1,
those of the published results and leaderboards): `num_correct_trials` = 5 trials, each with the problem's own
`get_inputs()` drawn under a fresh seed, at the problem file's own sizes, the candidate's output compared with the
eager Model's by `torch.allclose(output, output_new, atol=1e-02, rtol=1e-02)`; all five must pass. (Its newest code
takes the tolerance from the dtype, 1e-4 for fp32: that is closer to this harness's default than to the results
published under 1e-2.)

Here: the same five draws of `get_inputs()` at the first size set (the file's own sizes on a GPU; CPU mode's reduced
ones, as it cannot run the file's), and the same element-wise test, |out - truth| <= atol + rtol |truth|, against the
fp64 truth rather than eager's fp32 output: the two differ by eager's rounding, ~1e-7 relative, far below 1e-2. A NaN
where the truth has its own NaN is right (allclose's equal_nan=False would refuse every answer there, eager's too).
The run-time rules, the timed calls' checks and everything else of the judge apply as at fp32.
"""

from __future__ import annotations

from typing import Any

from agent.harness.job import TrialSpec, plan_trials
from agent.harness.settings import settings
from agent.schema import SizeSet


def tolerance() -> float:
    """KernelBench v0/v0.1's atol = rtol (agent/data/harness.toml): the tolerance of its published results."""
    return settings().validation.kernelbench_tolerance


def words() -> str:
    tol = f"{tolerance():g}"
    return f"KernelBench's check, |out - truth| <= {tol} + {tol} |truth|, on the problem's get_inputs()"


def trials(sizes: list[SizeSet], seed: int) -> list[TrialSpec]:
    """KernelBench's draws: its num_correct_trials calls on the problem's own get_inputs() at the first size set,
    each under a new seed."""
    first = sizes[0].model_copy(update={"distributions": ["problem"] * settings().validation.kernelbench_trials})
    return plan_trials([first], seed, [])


def error(out: Any, truth: Any) -> float:
    """max |out - truth| / (1 + |truth|): at most tol exactly where allclose(out, truth, atol=tol, rtol=tol) holds,
    whatever tol (inf where out is wrong in kind: agent.harness.worker.truth.wrong_in_kind)."""
    import torch

    from agent.harness.worker.truth import representable, wrong_in_kind

    o = out.detach().to("cpu", torch.float64)
    t = representable(truth.detach().to("cpu", torch.float64), out.dtype)
    if o.shape != t.shape:
        return float("inf")
    if bool(wrong_in_kind(o, t).any()):
        return float("inf")
    fin = torch.isfinite(t)
    if not bool(fin.any()):
        return 0.0
    return float(((o[fin] - t[fin]).abs() / (1.0 + t[fin].abs())).max())
