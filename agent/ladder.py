"""Which stage each round runs, decided once per run as a policy (`policy_of`): one fixed stage (`Fixed`), or the
ladder of --stage auto (`Ladder`): stay on a stage until one of its rules for moving on holds (the stage stalled for
--patience rounds; its best is at its roof), then follow the bottleneck its best measures (agent.hostbound.bottleneck)
to the stage that addresses it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agent.diagnosis import for_prompt
from agent.hostbound import bottleneck
from agent.ncu.metadata import meta
from agent.plural import count
from agent.protocols import Measured, StagePolicy, Step
from agent.runconfig import AUTO
from agent.schema import Objective
from agent.stages import get_stage, ladder, load_stages

FLOOR = "correctness"  # the ladder's floor: no stage rule beyond the harness's own


NEXT_FOR = {  # what a converged stage's bottleneck calls for next, with why
    "latency-bound": ("parallelism", "too few warps in flight to hide memory latency"),
    "launch-bound": ("tuning", "kernels so short that launch and meta-parameters dominate"),
    "memory-bound": ("memory-access", "bandwidth-bound: make every byte count"),
    "compute-bound": ("algebraic", "arithmetic-bound: eliminate work"),
    "host-bound": ("host-overhead", "the GPU waits for Python: fewer launches and less host work per call"),
}


@dataclass(frozen=True)
class Fixed:
    """One stage for the whole run; it stops after `patience` rounds without a new best."""

    stage: str
    patience: int
    floor: str | None = None
    own_stages: bool = False

    @property
    def first(self) -> str:
        return self.stage

    def next(self, current: str, visited: set[str], best: Measured | None, stale: int) -> Step:
        return Step(self.stage)

    def stop_after(self, stale: int) -> str | None:
        return f"no improvement in {count(stale, 'iteration')} (patience {self.patience})" if (
            stale >= self.patience) else None


# ---------------------------------------------------------------- the ladder's rules for moving on


class MoveOn(Protocol):
    """A rule for leaving the current stage: why it holds ("": nothing the bottleneck's reason does not say), or None."""

    def holds(self, current: str, best: Measured, stale: int) -> str | None: ...


@dataclass(frozen=True)
class Stalled:
    """`patience` rounds without a new best."""

    patience: int

    def holds(self, current: str, best: Measured, stale: int) -> str | None:
        return "" if stale >= self.patience else None  # the move's reason names the stalled stage's bottleneck


@dataclass(frozen=True)
class AtRoof:
    """The stage's own best is at its roof (the diagnosis' at-peak finding: DRAM at peak, or the dominant kernel at
    the roofline's memory or compute roof): only fewer bytes or less arithmetic help, which later stages are for. A
    best the stage did not find (a starting kernel, an earlier stage's) gives it its rounds first."""

    def holds(self, current: str, best: Measured, stale: int) -> str | None:
        if best.found_in != current:
            return None
        findings = for_prompt(best.profile, best.timing, limit=None)
        if any(f.kind == "at-dram-peak" for f in findings):
            return f"{current}'s best is at its roof"
        roofs = [f for f in findings if f.kind in ("memory-bound", "compute-bound")]
        top = max(roofs, key=lambda f: f.figures.get("duration_us", 0.0), default=None)
        return f"{current}'s best is at its roof" if top is not None and top.gain_pct is None else None


@dataclass(frozen=True)
class Ladder:
    """--stage auto: from the first stage above the floor, up the ladder by bottleneck as its rules say."""

    rules: tuple[MoveOn, ...]
    objective: Objective = "latency"
    floor: str | None = FLOOR
    own_stages: bool = True

    @property
    def first(self) -> str:
        return next(name for name in ladder() if name != FLOOR)

    def next(self, current: str, visited: set[str], best: Measured | None, stale: int) -> Step:
        if best is None:
            return Step(FLOOR, "no correct kernel yet")
        why = None if current == FLOOR else next(
            (w for rule in self.rules if (w := rule.holds(current, best, stale)) is not None), None)
        if current != FLOOR and why is None:
            patience = next((r.patience for r in self.rules if isinstance(r, Stalled)), 0)
            return Step(current, f"improving on {current}" if stale == 0 else
                        f"{stale}/{patience} iterations without gain")
        return self._move(current, visited, best, why or "")

    def _move(self, current: str, visited: set[str], best: Measured, why_move: str) -> Step:
        b = bottleneck(best.profile, best.timing, self.objective)
        open_stages = [s.name for s in load_stages() if s.name not in visited and s.name != FLOOR
                       and (s.entered_for is None or (b is not None and b.kind == s.entered_for))]
        if not open_stages:
            return Step(None, f"stage ladder exhausted (last: {current})")
        if b is None:
            return Step(open_stages[0], f"{why_move or current + ' stalled'}; no profile to classify, next on the ladder")
        wanted, why = NEXT_FOR.get(b.kind, (open_stages[0], "unclassified"))
        if b.kind == "memory-bound" and b.figures.get("dram_pct", 0.0) >= meta().bottleneck.near_peak_dram_pct:
            wanted, why = "algebraic", f"DRAM at {b.figures['dram_pct']:.0f} % of peak: only moving fewer bytes helps"
        if wanted not in open_stages:
            wanted, why = open_stages[0], f"{why}, but {wanted} is done: next on the ladder"
        return Step(wanted, (f"{why_move}; " if why_move else "") + f"{b.reason}: {why}")  # the reason names kind and figures

    def stop_after(self, stale: int) -> str | None:
        return None  # a stalled stage is left for the next (`next`): the ladder ends when none is open


def policy_of(stage: str, patience: int, objective: Objective = "latency") -> StagePolicy:
    """The run's stage policy, decided once: `auto` is the ladder, any other name that stage (an unknown one is one
    line naming the choices)."""
    if stage == AUTO:
        return Ladder(rules=(AtRoof(), Stalled(patience)), objective=objective)
    return Fixed(get_stage(stage).name, patience)


def choose_stage(current: str, visited: set[str], best: Measured | None, stale: int, patience: int,
                 objective: Objective = "latency") -> tuple[str | None, str]:
    """The ladder's next stage and why (policy_of(AUTO, ...).next as a pair)."""
    step = Ladder(rules=(AtRoof(), Stalled(patience)), objective=objective).next(current, visited, best, stale)
    return step.stage, step.reason or ""
