"""How long one candidate may take: scaled to the problem on the GPU, so a hang costs seconds, not minutes.

A correct candidate's worker starts (interpreter, torch, CUDA), compiles its kernels (autotuning included), then
makes a known number of calls: the validation trials, the timing warm-up and probe, both clocks' repetitions. The
limit is a start allowance plus `slowdown` times what the problem's own eager Model takes for those calls, so a
kernel ten times slower than eager still finishes and a hang is killed well under a minute at full size.
"""

from __future__ import annotations

from agent.harness.job import Device, WorkerResult
from agent.harness.settings import settings


class Limit:
    """A time limit and, for the verdict of a candidate that reaches it, where it comes from."""

    def __init__(self, seconds: float, why: str) -> None:
        self.seconds, self.why = seconds, why

    def __repr__(self) -> str:
        return f"Limit({self.seconds:.1f} s: {self.why})"


def limit_for(problem: str, device: Device, trials: int, timed: bool, base: WorkerResult | None,
              given_s: float | None) -> Limit:
    """`given_s` (--timeout) if set; GPU: scaled to the eager baseline; CPU mode, or no baseline: the fixed limit."""
    sandbox = settings().sandbox
    if given_s is not None:
        return Limit(given_s, "the limit given with --timeout")
    eager = base.eager if base else None
    if device != "cuda" or eager is None:
        return Limit(sandbox.timeout_s, "the harness's fixed limit" + (" in CPU mode" if device != "cuda" else ""))
    call_ms = max(eager.median_ms, eager.latency_ms or 0.0)
    work_s = calls(call_ms, trials, timed) * call_ms / 1000
    seconds = sandbox.start_allowance_s + sandbox.slowdown * work_s
    return Limit(seconds, f"the limit for {problem} here: {sandbox.start_allowance_s:g} s to start and compile + "
                          f"{sandbox.slowdown:g} x the {work_s:.2f} s its eager Model takes for the same calls")


def calls(call_ms: float, trials: int, timed: bool) -> int:
    """Calls a candidate as fast as `call_ms` makes: each trial (and a warm-up before a traced one), then timing."""
    n = 2 * trials
    if timed:
        from agent.harness.timing import device_reps, latency_reps

        cfg = settings().timing
        n += cfg.warmup_calls + 3 + device_reps(cfg, call_ms) + latency_reps(cfg, call_ms)
    return n
