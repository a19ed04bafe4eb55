"""The leaderboard: indexed candidates ranked by speedup vs eager on their run's objective clock, then time."""

from __future__ import annotations

import sqlite3

from agent.schema import CLOCK_KEYS, Verdict
from agent.store.records import LeaderRow


def leaderboard(db: sqlite3.Connection, problem: str | None = None, run_id: str | None = None,
                stage: str | None = None, include_all: bool = False, limit: int | None = None) -> list[LeaderRow]:
    """Candidates ranked by speedup vs eager, then time; correct only unless include_all (then failures last).

    `run_id` is a full run id (Store.leaderboard resolves a prefix first)."""
    where: list[str] = []
    params: list[object] = []
    if not include_all:
        where.append("c.verdict = ?")
        params.append(str(Verdict.CORRECT))
    if problem:
        where.append("r.problem = ?")
        params.append(problem)
    if run_id:
        where.append("c.run_id = ?")
        params.append(run_id)
    if stage:
        where.append("c.stage = ?")
        params.append(stage)
    sql = (
        "SELECT c.*, r.problem FROM candidates c JOIN runs r ON r.id = c.run_id"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY c.verdict != 'correct', c.speedup_vs_eager IS NULL, c.speedup_vs_eager DESC,"
        " c.candidate_ms IS NULL, c.candidate_ms, c.created_at, c.id"
    )
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    return [
        LeaderRow(
            rank=rank, candidate=r["id"], run=r["run_id"], problem=r["problem"], stage=r["stage"],
            iteration=r["iteration"], verdict=Verdict(r["verdict"]), eager_ms=r["eager_ms"],
            compile_ms=r["compile_ms"], dram_pct=r["dram_pct"], **{k: r[k] for k in CLOCK_KEYS},
            tokens=r["prompt_tokens"] + r["completion_tokens"], cost_usd=r["cost_usd"],
            meaningful=None if r["meaningful"] is None else bool(r["meaningful"]), device=r["device"],
        )
        for rank, r in enumerate(db.execute(sql, params).fetchall(), start=1)
    ]
