"""What the store hands out: a run, an iteration's attempt, an LLM exchange, where a run stopped, a leaderboard row."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from agent.runconfig import RunConfig
from agent.schema import Candidate, Group, Model, Usage, Verdict

RunStatus = Literal["running", "finished", "failed", "interrupted"]
RUN_STATUSES: tuple[str, ...] = ("running", "finished", "failed", "interrupted")


class RunRecord(Model):
    """A run as stored in run.json, plus totals derived from its candidates and calls."""

    id: str
    config: RunConfig
    gpu: str
    device: str
    status: RunStatus = "running"
    stop_reason: str | None = Field(default=None, description="why an interrupted or failed run stopped, one line: "
                                    "the signal, or the error (none for runs recorded before)")
    started_at: datetime
    finished_at: datetime | None = None
    best: str | None = Field(default=None, description="candidate id of the current best")
    pid: int | None = Field(default=None, description="process running it, to tell 'running' from 'interrupted'")
    host: str | None = None
    versions: dict[str, str] = Field(default_factory=dict, description="agent, python, torch, triton, cuda, ... "
                                     "(agent.versions); empty for runs recorded before")
    # derived (not stored in run.json): filled from the index by get_run/list_runs
    usage: Usage = Field(default_factory=Usage)
    iterations: int = Field(default=0, description="last complete iteration (0: only the starting kernel)")
    candidates: int = 0


class IterationRecord(Model):
    """One attempt at an iteration: the rendered prompt and why this stage was chosen."""

    run_id: str
    iteration: int
    attempt: int = 1
    stage: str
    prompt: str
    reason: str
    best_before: str | None = None
    started_at: datetime
    completed: bool = False
    groups: list[Group] = Field(default_factory=list, description="the round's (parent, stage, samples, prompt) "
                                "groups; empty in runs recorded before them (one group: best_before and prompt)")

    def plan(self, samples: int) -> list[Group]:
        """The round's groups, also for an iteration recorded before groups were."""
        return self.groups or [Group(parent=self.best_before, stage=self.stage, k=samples, prompt=self.prompt)]


class CallRecord(Model):
    """One LLM HTTP exchange, exactly as sent and received."""

    run_id: str
    seq: int
    iteration: int
    request: dict[str, Any]
    response_raw: str
    usage: Usage | None = None
    created_at: datetime


class ResumeState(Model):
    """Where a run stopped: what `--resume RUN_ID` needs to carry on."""

    run_id: str
    last_iteration: int = Field(default=-1, description="last complete iteration; -1 if not even iteration 0")
    best: str | None = None
    stage: str | None = Field(default=None, description="stage of the last complete iteration")
    usage: Usage = Field(default_factory=Usage)
    pending_iteration: int | None = Field(default=None, description="an iteration begun but not completed")
    pending: list[Candidate] = Field(default_factory=list, description="candidates the pending iteration recorded")


class LeaderRow(Model):
    rank: int | None  # within its problem and device; a failure has none
    candidate: str
    run: str
    problem: str
    stage: str
    iteration: int
    parent: str | None = Field(default=None, description="the candidate whose code its prompt showed")
    verdict: Verdict
    objective: str | None = Field(default=None, description="the clock of candidate_ms and the plain speedups")
    candidate_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    device_ms: float | None = None
    latency_ms: float | None = None
    host_ms: float | None = None
    launches: int | None = None
    device_speedup_vs_eager: float | None = None
    latency_speedup_vs_eager: float | None = None
    device_speedup_vs_compile: float | None = None
    latency_speedup_vs_compile: float | None = None
    energy_mj: float | None = Field(default=None, description="GPU energy per call, mJ")
    energy_note: str | None = Field(default=None, description="why energy_mj is None")
    dram_pct: float | None = None
    tokens: int = 0
    cost_usd: float | None = Field(default=0.0, description="None: the model's price is not known")
    run_best: bool = Field(default=False, description="the run's own best (what its summary names)")
    message: str | None = Field(default=None, description="a failed candidate's first line of why")
    meaningful: bool | None = Field(default=None, description="False for CPU-mode timings")
    device: str | None = None
