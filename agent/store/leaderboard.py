"""The leaderboard: indexed candidates ranked by time on their run's objective clock, within a problem and device;
candidates of runs that optimize energy, by their energy per call where it was measured (ranked among themselves:
millijoules and milliseconds are not compared).

Time, not the speedup: on the CPU eager is re-timed every round, so a ratio ranks a 44.5 ms candidate above a 40.2 ms
one; times of different problems (or of the CPU and a GPU) are not compared, so each (problem, device) has its own
ranks. On a tie the run's own best comes first, so the run summary and the first row agree."""

from __future__ import annotations

import sqlite3

from agent.schema import CLOCK_KEYS, Verdict
from agent.store.records import LeaderRow


def leaderboard(db: sqlite3.Connection, problem: str | None = None, run_id: str | None = None,
                stage: str | None = None, include_all: bool = False, limit: int | None = None) -> list[LeaderRow]:
    """Candidates ranked by time within each problem and device; correct only unless include_all (then failures
    last, with their message).

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
    by_energy = "(c.objective = 'energy' AND c.energy_mj IS NOT NULL)"
    sql = (
        f"SELECT c.*, r.problem, c.id = r.best AS run_best, {by_energy} AS by_energy FROM candidates c"
        " JOIN runs r ON r.id = c.run_id"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY c.verdict != 'correct', r.problem, c.device, by_energy, c.candidate_ms IS NULL,"
        " CASE WHEN by_energy THEN c.energy_mj ELSE c.candidate_ms END, run_best DESC, c.created_at, c.id"
    )
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    rows: list[LeaderRow] = []
    ranks: dict[tuple[str, str, bool], int] = {}  # within (problem, device, unit); failures come after, unranked
    for r in db.execute(sql, params).fetchall():
        correct = r["verdict"] == str(Verdict.CORRECT)
        group = (r["problem"], r["device"], bool(r["by_energy"]))
        if correct:
            ranks[group] = ranks.get(group, 0) + 1
        rows.append(LeaderRow(
            rank=ranks[group] if correct else None, candidate=r["id"], run=r["run_id"], problem=r["problem"],
            stage=r["stage"], iteration=r["iteration"], parent=r["parent"], verdict=Verdict(r["verdict"]),
            eager_ms=r["eager_ms"],
            compile_ms=r["compile_ms"], dram_pct=r["dram_pct"], **{k: r[k] for k in CLOCK_KEYS},
            tokens=r["prompt_tokens"] + r["completion_tokens"],
            cost_usd=r["cost_usd"] if r["priced"] or not r["prompt_tokens"] + r["completion_tokens"] else None,
            meaningful=None if r["meaningful"] is None else bool(r["meaningful"]), device=r["device"],
            run_best=bool(r["run_best"]),
            message=None if r["verdict"] == str(Verdict.CORRECT) else _first_line(r["message"]),
        ))
    return rows


def _first_line(message: str | None) -> str:
    lines = (message or "").strip().splitlines()
    return lines[0] if lines else ""
