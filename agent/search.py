"""The search: which recorded candidates a round starts from (its parents), and what the run remembers.

Every correct, timed candidate with code unlike any earlier one is a node; each sample of a round takes one parent, so
a round's K answers come from up to K (parent, stage) groups (`Group`, one ProposalContext each). The policies:

    greedy  all K samples from the run's best (what the loop always did)
    beam    the B best distinct nodes by time, the K samples dealt out in rank order (the fastest gets the extra ones)
    tree    sample by sample, the node with the highest UCT score, counting the samples this round already gave it:

                score(n) = best_ms / ms(n) + C * sqrt(ln(T) / (1 + v(n)))

            best_ms / ms(n) is the node's gain (1 for the fastest node, 0.5 for one twice as slow), v(n) the samples
            drawn from n so far, T = 1 + all samples drawn in the run, C = TREE_C. A node nobody has expanded gains
            C * sqrt(ln T) over an expanded one: the more samples the run has spent, the more a slow line that was
            never followed is worth a look. Ties go to the faster node, then the older.

Everything here is derived from recorded candidates (their parent, stage, verdict, time, idea): a resumed run rebuilds
the same state from the store, and an interrupted round is redone with the groups its iteration recorded.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from dataclasses import dataclass, field

from pydantic import Field

from agent.memory import MemoryEntry
from agent.runconfig import RunConfig
from agent.schema import Candidate, Group, Model, Objective, SearchPolicy, Verdict

# UCB1's exploration constant for rewards in [0, 1] is sqrt(2); 1.0 explores less: with K = 2 samples a round, a node
# 10x slower than the best is expanded once its rivals hold about 7 samples (T = 8), whatever their own gain.
TREE_C = 1.0


class Node(Model):
    """A correct, timed candidate the search may start from."""

    id: str
    parent: str | None
    stage: str
    ms: float = Field(description="on the run's objective clock")


@dataclass
class SearchState:
    """The nodes, the samples drawn from each, and the memory, of one run."""

    policy: SearchPolicy
    objective: Objective
    beam: int = 3
    nodes: dict[str, Node] = field(default_factory=dict)
    visits: dict[str | None, int] = field(default_factory=dict)  # parent -> candidates recorded from it
    memory: list[MemoryEntry] = field(default_factory=list)
    profiled: set[str] = field(default_factory=set)  # parents this process profiled (or tried to)
    _codes: set[str] = field(default_factory=set)
    _ms: dict[str, float] = field(default_factory=dict)  # every timed candidate's time (a memory entry's parent_ms)

    @classmethod
    def of(cls, candidates: list[Candidate], policy: SearchPolicy, objective: Objective, beam: int = 3) -> SearchState:
        state = cls(policy=policy, objective=objective, beam=beam)
        for c in candidates:
            state.add(c)
        return state

    def add(self, c: Candidate) -> None:
        """A recorded candidate (in recorded order): a visit to its parent, an entry in memory, a node if correct and
        new."""
        t = c.result.timing if c.result.verdict == Verdict.CORRECT else None
        if t is not None:
            self._ms[c.id] = t.clock(self.objective)[0]
        if c.iteration >= 1:  # the starting kernel was nobody's idea
            self.visits[c.parent] = self.visits.get(c.parent, 0) + 1
            self.memory.append(MemoryEntry.of(c, self.objective, self._ms.get(c.parent) if c.parent else None))
        if t is None or not c.code:
            return
        key = hashlib.sha256(c.code.strip().encode()).hexdigest()
        if key in self._codes:  # the same code again is no new place to start from
            return
        self._codes.add(key)
        self.nodes[c.id] = Node(id=c.id, parent=c.parent, stage=c.stage, ms=self._ms[c.id])

    def reject(self, candidate: str) -> None:
        """A node whose timing ncu contradicted (agent.crosscheck) is no parent."""
        self.nodes.pop(candidate, None)

    def remembered(self, before: int | None = None) -> list[MemoryEntry]:
        """The memory of iterations before `before` (all of it for None): what a prompt of iteration `before` shows,
        the same after a resume."""
        return [m for m in self.memory if before is None or m.iteration < before]

    # ------------------------------------------------------------ choosing parents

    def parents(self, k: int, best: str | None) -> list[tuple[str | None, int]]:
        """(parent, samples) for a round of k samples, in the order to ask; `best` is the run's current best."""
        if self.policy == "greedy" or not self.nodes:
            return [(best, k)]
        if self.policy == "beam":
            ranked = sorted(self.nodes.values(), key=lambda n: (n.ms, n.id))[: min(self.beam, k)]
            return [(n.id, k // len(ranked) + (i < k % len(ranked))) for i, n in enumerate(ranked)]
        picked: dict[str | None, int] = {}
        visits = {n: self.visits.get(n, 0) for n in self.nodes}
        total = 1 + sum(self.visits.values())
        for _ in range(k):
            n = max(self.nodes.values(), key=lambda n: (self.score(n.id, visits[n.id], total), -n.ms, _older(n.id)))
            picked[n.id] = picked.get(n.id, 0) + 1
            visits[n.id] += 1
            total += 1
        return list(picked.items())

    def plan(self, k: int, best: str | None, stage: str, auto: bool) -> list[Group]:
        """The round's groups: each parent with its samples and stage. With --stage auto the best's group takes the
        stage the loop chose and another parent goes on in the stage that produced it; else every group takes
        `stage`."""
        return [Group(parent=p, k=n, stage=self.nodes[p].stage if auto and p != best and p in self.nodes else stage)
                for p, n in self.parents(k, best)]

    def score(self, node: str, visits: int, total: int) -> float:
        """The tree's UCT score (the module's docstring)."""
        best_ms = min(n.ms for n in self.nodes.values())
        gain = best_ms / self.nodes[node].ms if self.nodes[node].ms > 0 else 1.0
        return gain + TREE_C * math.sqrt(math.log(total) / (1 + visits))


def _older(candidate: str) -> tuple[int, ...]:
    """Sorts an earlier id (iteration, attempt, index) higher: max() then prefers it on a tie."""
    m = re.search(r"-i(\d+)(?:a(\d+))?-c(\d+)$", candidate)
    if m is None:
        return (0,)
    return tuple(-int(x or 1) for x in m.groups())


@dataclass
class Limits:
    """--max-candidates (proposals judged in the run, an interrupted round's included) and --max-minutes (this
    invocation's wall time: a round is never cut, and no round starts once it is spent)."""

    max_candidates: int | None = None
    max_minutes: float | None = None
    judged: int = 0
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def of(cls, config: RunConfig, judged: int) -> Limits:
        return cls(max_candidates=config.max_candidates, max_minutes=config.max_minutes, judged=judged)

    def samples(self, k: int) -> int:
        """A round's samples: k, or what the candidate budget has left."""
        return k if self.max_candidates is None else max(0, min(k, self.max_candidates - self.judged))

    def spent(self, k: int) -> str | None:
        """Why no round may start now (None: one may)."""
        if k <= 0:
            return f"candidate budget spent ({self.judged} of --max-candidates {self.max_candidates} judged)"
        minutes = (time.monotonic() - self.started) / 60
        if self.max_minutes is not None and minutes >= self.max_minutes:
            return f"time budget spent ({minutes:.1f} of --max-minutes {self.max_minutes:g})"
        return None
