"""The SASS of a report's kernels with ncu's source counters per instruction, read without a GPU.

ncu's full set records the Source Counters section: each instruction's executed count (`inst_executed`) and the warp
samples taken at it (`smsp__pcsamp_sample_count`, with the stall reason of each sample), keyed by program counter;
the report also holds the SASS text of every instruction it saw (ncu_report's `sass_by_pc`). A report of a stage's
metrics alone has none of this. For a kernel launched several times, the longest launch is read.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from agent.errors import UserError
from agent.ncu.metadata import DURATION
from agent.schema import Model

EXECUTED = "inst_executed"
SAMPLES = "smsp__pcsamp_sample_count"
# Per-instruction stall samples worth naming beside an instruction (the reasons a memory-bound kernel meets).
STALL_SAMPLES = ("long_scoreboard", "lg_throttle", "barrier", "short_scoreboard", "mio_throttle", "wait",
                 "math_pipe_throttle")


class Instruction(Model):
    pc: int
    sass: str
    executed: int = 0
    samples: int = Field(default=0, description="warp samples taken at this instruction (where time goes)")
    stalls: dict[str, int] = Field(default_factory=dict, description="samples by stall reason, the named ones")


class KernelSass(Model):
    name: str
    instructions: list[Instruction]

    @property
    def total_samples(self) -> int:
        return sum(i.samples for i in self.instructions)

    def hottest(self, n: int = 10) -> list[Instruction]:
        """The instructions with the most warp samples (by executed count where nothing was sampled)."""
        return sorted(self.instructions, key=lambda i: (i.samples, i.executed), reverse=True)[:n]


def read_sass(path: Path) -> list[KernelSass]:
    """Every kernel's SASS with its counters; a one-line UserError where the report has no source counters."""
    import ncu_report

    try:
        ctx = ncu_report.load_report(str(path))
    except Exception as e:  # the module raises plain exceptions with a sentence
        raise UserError(f"cannot read {path}: {str(e).strip().splitlines()[0] if str(e).strip() else e}") from e
    longest: dict[str, tuple[float, object]] = {}
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for i in range(rng.num_actions()):
            action = rng.action_by_idx(i)
            d = action.metric_by_name(DURATION)
            dur = float(d.value()) if d is not None and d.has_value() else 0.0
            if action.name() not in longest or dur > longest[action.name()][0]:
                longest[action.name()] = (dur, action)
    out = [k for name, (_, action) in longest.items() if (k := _kernel(name, action)) is not None]
    if not out:
        raise UserError(f"{path} has no SASS: it holds no source counters (a report of a stage's metrics)",
                        "profile with ncu's full set: agent profile FILE --set full")
    return out


def _kernel(name: str, action) -> KernelSass | None:  # action: ncu_report's IAction
    executed = _per_pc(action, EXECUTED)
    if not executed:
        return None
    samples = _per_pc(action, SAMPLES)
    stalls = {r: _per_pc(action, f"smsp__pcsamp_warps_issue_stalled_{r}") for r in STALL_SAMPLES}
    pcs = sorted(set(executed) | set(samples))
    return KernelSass(name=name, instructions=[
        Instruction(pc=pc, sass=str(action.sass_by_pc(pc)).strip(), executed=executed.get(pc, 0),
                    samples=samples.get(pc, 0),
                    stalls={r: n for r, by_pc in stalls.items() if (n := by_pc.get(pc, 0))})
        for pc in pcs])


def _per_pc(action, metric: str) -> dict[int, int]:
    m = action.metric_by_name(metric)
    if m is None or not m.has_correlation_ids():
        return {}
    ids = m.correlation_ids()
    return {ids.as_uint64(i): m.as_uint64(i) for i in range(m.num_instances())}
