"""How long one candidate may take: scaled to the problem on the GPU, so a hang costs seconds, not minutes.

A correct candidate's worker starts (interpreter, torch, CUDA), compiles its kernels (autotuning included), then
makes a known number of calls: the validation trials, the timing warm-up and probe, both clocks' repetitions. The
limit is a start allowance plus `slowdown` times what the problem's own eager Model takes for those calls, so a
kernel ten times slower than eager still finishes and a hang is killed well under a minute at full size.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from agent.harness.job import Device, WorkerResult
from agent.harness.settings import settings


class Limit:
    """A time limit and, for the verdict of a candidate that reaches it, where it comes from. `per_pass`: CPU mode's
    fixed limit, granted again for each autotune config pass after the first (ConfigPasses)."""

    def __init__(self, seconds: float, why: str, per_pass: bool = False) -> None:
        self.seconds, self.why, self.per_pass = seconds, why, per_pass

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
        return Limit(sandbox.timeout_s, "the harness's fixed limit" + (" in CPU mode" if device != "cuda" else ""),
                     per_pass=device != "cuda")
    call_ms = max(eager.median_ms, eager.latency_ms or 0.0)
    work_s = calls(call_ms, trials, timed) * call_ms / 1000
    seconds = sandbox.start_allowance_s + sandbox.slowdown * work_s
    return Limit(seconds, f"the limit for {problem} here: {sandbox.start_allowance_s:g} s to start and compile + "
                          f"{sandbox.slowdown:g} x the {work_s:.2f} s its eager Model takes for the same calls")


def calls(call_ms: float, trials: int, timed: bool) -> int:
    """Calls a candidate as fast as `call_ms` makes: each trial (and a warm-up before a traced one), then timing."""
    n = 2 * trials
    if timed:
        from agent.harness.worker.timing import device_reps, latency_reps

        cfg = settings().timing
        n += cfg.warmup_calls + 3 + device_reps(cfg, call_ms) + latency_reps(cfg, call_ms)
    return n


class ConfigPasses:
    """CPU mode validates every autotune config, one pass over the trials each; the fixed limit is a pass's: each pass
    after the first, up to sandbox.cpu_config_passes_timed in all, is granted it again. The worker writes how many
    passes it will make as the first ends (WorkerResult.planned_passes, in its result file, read here at most once a
    second): a candidate gains time only by giving its kernels configs, each validated in full."""

    def __init__(self, result_path: Path, seconds: float) -> None:
        self.path, self.seconds = result_path, seconds
        self.most = settings().sandbox.cpu_config_passes_timed
        self.passes, self._read_at = 1, float("-inf")

    def __call__(self) -> float:
        """The seconds granted beyond the first pass's."""
        now = time.monotonic()
        if now - self._read_at >= 1.0:
            self._read_at = now
            self.passes = max(self.passes, min(self.most, _planned(self.path)))
        return self.seconds * (self.passes - 1)

    def limit(self, base: Limit) -> Limit:
        """The limit the candidate ran under, for its verdict."""
        self()
        if self.passes == 1:
            return base
        return Limit(base.seconds * self.passes, f"{base.why}, {base.seconds:.0f} s for each of {self.passes} autotune "
                                                 "config passes")


def _planned(path: Path) -> int:
    try:
        n = json.loads(path.read_text()).get("planned_passes", 1)
    except (OSError, ValueError, AttributeError):  # not written yet, or being replaced
        return 1
    return n if isinstance(n, int) and n > 1 else 1
