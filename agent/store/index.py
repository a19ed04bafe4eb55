"""The SQLite index, candidates/index.sqlite: opening it (WAL, migrated), its rows in and out, and rebuilding it
from the files, which are the truth: whatever the index lacks or has lost, `index_run_dir` puts back.
"""

from __future__ import annotations

import json
import logging
import os
import random
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from agent.ncu.metadata import DRAM, DURATION, longest_kernel
from agent.redact import scrub
from agent.runconfig import RunConfig
from agent.schema import CLOCK_KEYS, Candidate, Group, Profile, Usage
from agent.store.files import TMP_PREFIX, alive, load, read_candidate, run_dirs
from agent.store.migrations import apply_migrations, packaged_migrations
from agent.store.records import CallRecord, IterationRecord, RunRecord

log = logging.getLogger(__name__)
T = TypeVar("T")

INDEX_NAME = "index.sqlite"
DRAM_METRIC, DURATION_METRIC = DRAM, DURATION  # the names the index's columns are read from


def _iso(t: datetime | None) -> str | None:
    return t.astimezone(timezone.utc).isoformat() if t else None


def longest_kernel_dram_pct(profile: Profile | None) -> float | None:
    """DRAM throughput (% of peak) of the profile's longest kernel: the one that decides the time."""
    if profile is None or not profile.kernels:
        return None
    kernels = list(profile.kernels.values())
    longest = longest_kernel(profile)
    assert longest is not None
    if DRAM_METRIC in longest.metrics:
        return float(longest.metrics[DRAM_METRIC])
    with_dram = [k for k in kernels if DRAM_METRIC in k.metrics]
    return float(with_dram[0].metrics[DRAM_METRIC]) if with_dram else None


# ---------------------------------------------------------------- connection

LOCK_WAIT_S = 30.0


def when_unlocked(step: Callable[[], T], wait_s: float = LOCK_WAIT_S) -> T:
    """`step()`, retried while SQLite says "database is locked", for up to `wait_s`.

    The busy timeout does not cover everything: two processes opening a fresh store at once both hold a shared lock
    while switching it to WAL, and SQLite answers one of them BUSY at once rather than let them deadlock (seen in CI).
    """
    deadline = time.monotonic() + wait_s
    delay = 0.005
    while True:
        try:
            return step()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay * (1 + random.random()))
        delay = min(delay * 2, 0.25)


def _configure(conn: sqlite3.Connection) -> sqlite3.Connection:
    conn.row_factory = sqlite3.Row
    when_unlocked(lambda: conn.execute("PRAGMA journal_mode=WAL"))
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across app crashes; files are the truth anyway
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _connect(path: Path) -> sqlite3.Connection:
    return _configure(sqlite3.connect(path, isolation_level=None, timeout=30.0, check_same_thread=False))


def open_index(candidates_dir: Path, db_path: Path) -> tuple[sqlite3.Connection, bool]:
    """The connection, migrated; and whether this call created the schema (the index was new or lost)."""
    candidates_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db_path, isolation_level=None, timeout=30.0, check_same_thread=False)
    try:
        _configure(conn)
        applied = apply_migrations(conn)
        conn.execute("SELECT COUNT(*) FROM runs").fetchone()
    except sqlite3.OperationalError:  # locked, read-only, a bad migration: not a reason to rebuild
        conn.close()
        raise
    except sqlite3.DatabaseError as e:  # "not a database", "malformed": the files can rebuild it
        log.warning("index %s is unreadable (%s): rebuilding it from the files", db_path, e)
        conn.close()
        _quarantine(db_path)
        return rebuild(candidates_dir, db_path), False
    first = min((v for v, _, _ in packaged_migrations()), default=None)
    # concurrent openers of a fresh store: only the one that applied the first migration syncs
    return conn, first is not None and first in applied


def open_readonly(candidates_dir: Path, db_path: Path, skipped: list[str]) -> sqlite3.Connection:
    """The index of a store this process cannot write (a shared results folder, a read-only mount): the file as it
    is where it is current, else an index built in memory from the files. Nothing is written either way."""
    if db_path.is_file():
        conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?immutable=1", uri=True, isolation_level=None,
                               check_same_thread=False)
        conn.row_factory = sqlite3.Row
        try:
            have = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            if {v for v, _, _ in packaged_migrations()} <= have:
                return conn
        except sqlite3.DatabaseError:
            pass
        conn.close()
        log.info("index %s is older than this agent or unreadable: reading the files instead", db_path)
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    apply_migrations(conn)
    conn.execute("BEGIN")
    for d in run_dirs(candidates_dir):
        try:
            read_run(d)
        except UnreadableRun as e:
            skipped.append(str(e))
            log.warning("skipped %s", e)
            continue
        index_run_dir(conn, candidates_dir, d, only_missing=False)
    conn.execute("COMMIT")
    return conn


def _quarantine(db_path: Path) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(db_path) + suffix)
        if p.exists():
            os.replace(p, p.with_name(f"{p.name}.corrupt-{stamp}"))


class Transaction:
    """`with Transaction(conn, lock) as db:` BEGIN IMMEDIATE ... COMMIT, ROLLBACK on any exception; under the lock."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock) -> None:
        self.conn, self.lock = conn, lock

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.lock.release()
            raise
        return self.conn

    def __exit__(self, exc_type: object, *rest: object) -> None:
        try:
            self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
        finally:
            self.lock.release()


# ---------------------------------------------------------------- rows in


def index_run(db: sqlite3.Connection, r: RunRecord) -> None:
    db.execute(
        # an upsert, not INSERT OR REPLACE: replacing the row would cascade-delete the run's candidates
        "INSERT INTO runs (id, problem, stage, gpu, device, llm, model, status, started_at, finished_at,"
        " best, pid, host, config, stop_reason) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET"
        " problem=excluded.problem, stage=excluded.stage, gpu=excluded.gpu, device=excluded.device,"
        " llm=excluded.llm, model=excluded.model, status=excluded.status, started_at=excluded.started_at,"
        " finished_at=excluded.finished_at, best=excluded.best, pid=excluded.pid, host=excluded.host,"
        " config=excluded.config, stop_reason=excluded.stop_reason",
        (r.id, r.config.problem, r.config.stage, r.gpu, r.device, r.config.llm, r.config.model, r.status,
         _iso(r.started_at), _iso(r.finished_at), r.best, r.pid, r.host, r.config.model_dump_json(), r.stop_reason),
    )


def index_iteration(db: sqlite3.Connection, r: IterationRecord) -> None:
    db.execute(
        "INSERT OR REPLACE INTO iterations (run_id, iteration, attempt, stage, prompt, reason, best_before,"
        " started_at, completed, groups) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (r.run_id, r.iteration, r.attempt, r.stage, scrub(r.prompt), scrub(r.reason), r.best_before, _iso(r.started_at),
         int(r.completed), scrub(json.dumps([g.model_dump(mode="json") for g in r.groups]))),
    )


def index_call(db: sqlite3.Connection, r: CallRecord) -> None:
    u = r.usage
    db.execute(
        "INSERT OR REPLACE INTO calls (run_id, seq, iteration, request, response_raw, prompt_tokens,"
        " completion_tokens, cost_usd, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
        (r.run_id, r.seq, r.iteration, scrub(json.dumps(r.request)), scrub(r.response_raw), u.prompt_tokens if u else None,
         u.completion_tokens if u else None, u.cost_usd if u else None, _iso(r.created_at)),
    )


def index_candidate(db: sqlite3.Connection, c: Candidate, attempt: int, rel_dir: str) -> None:
    t = c.result.timing
    u = c.answer.usage if c.answer else Usage()
    clocks = t.keys() if t else {k: None for k in CLOCK_KEYS}
    row = {
        "id": c.id, "run_id": c.run_id, "iteration": c.iteration, "attempt": attempt, "idx": c.index, "dir": rel_dir,
        "stage": c.stage, "verdict": str(c.result.verdict), "message": scrub(c.result.message),
        **clocks, "spread_pct": t.candidate_spread_pct if t else None, "eager_ms": t.eager_ms if t else None,
        "compile_ms": t.compile_ms if t else None, "meaningful": int(t.meaningful) if t else None,
        "device": c.result.device, "model": c.answer.model if c.answer else None, "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens, "cost_usd": u.cost_usd, "priced": int(u.priced),
        "dram_pct": longest_kernel_dram_pct(c.profile),
        "bottleneck": c.profile.bottleneck.kind if c.profile and c.profile.bottleneck else None,
        "parent": c.parent, "idea": scrub(c.idea), "finding": c.finding, "created_at": _iso(c.created_at),
    }
    db.execute(f"INSERT OR REPLACE INTO candidates ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
               list(row.values()))
    index_metrics(db, c.id, c.profile)


def index_profile(db: sqlite3.Connection, candidate_id: str, profile: Profile) -> None:
    """A profile taken after the candidate was indexed: its dram_pct, bottleneck and metrics."""
    db.execute("UPDATE candidates SET dram_pct = ?, bottleneck = ? WHERE id = ?",
               (longest_kernel_dram_pct(profile), profile.bottleneck.kind if profile.bottleneck else None,
                candidate_id))
    index_metrics(db, candidate_id, profile)


def index_metrics(db: sqlite3.Connection, candidate_id: str, profile: Profile | None) -> None:
    db.execute("DELETE FROM metrics WHERE candidate_id = ?", (candidate_id,))
    if profile is None:
        return
    db.executemany(
        "INSERT INTO metrics (candidate_id, kernel, metric, value) VALUES (?,?,?,?)",
        [(candidate_id, k, m, float(v)) for k, kp in profile.kernels.items() for m, v in kp.metrics.items()],
    )


# ---------------------------------------------------------------- rows out


def run_from_row(db: sqlite3.Connection, row: sqlite3.Row) -> RunRecord:
    """A runs row with its totals; 'running' whose process is gone reads as 'interrupted'."""
    status = row["status"]
    if status == "running" and not alive(row["pid"], row["host"]):
        status = "interrupted"  # its process is gone without saying goodbye: killed or crashed
    return RunRecord(
        id=row["id"], config=RunConfig.model_validate_json(row["config"]), gpu=row["gpu"], device=row["device"],
        status=status, started_at=datetime.fromisoformat(row["started_at"]),
        finished_at=datetime.fromisoformat(row["finished_at"]) if row["finished_at"] else None,
        best=row["best"], pid=row["pid"], host=row["host"], stop_reason=row["stop_reason"], usage=usage(db, row["id"]),
        iterations=max(last_complete(db, row["id"], row["status"])[0], 0),
        candidates=db.execute("SELECT COUNT(*) FROM candidates WHERE run_id = ?", (row["id"],)).fetchone()[0],
    )


def usage(db: sqlite3.Connection, run_id: str) -> Usage:
    u = db.execute("SELECT * FROM usage WHERE run_id = ?", (run_id,)).fetchone()
    if u is None:
        return Usage()
    return Usage(prompt_tokens=u["prompt_tokens"], completion_tokens=u["completion_tokens"], cost_usd=u["cost_usd"],
                 priced=not u["unpriced"])


def last_complete(db: sqlite3.Connection, run_id: str, status: str) -> tuple[int, str | None]:
    """(iteration, stage) of the last complete iteration, (-1, None) if none: an iteration is complete when
    marked so, when a later one began, or when the run ended."""
    rows = db.execute(
        "SELECT iteration, stage, completed FROM iterations i WHERE run_id = ? AND attempt = "
        "(SELECT MAX(attempt) FROM iterations j WHERE j.run_id = i.run_id AND j.iteration = i.iteration)"
        " ORDER BY iteration", (run_id,)).fetchall()
    last, stage = -1, None
    for n, r in enumerate(rows):
        later = n + 1 < len(rows)
        if r["completed"] or later or status in ("finished", "failed"):
            last, stage = r["iteration"], r["stage"]
    return last, stage


def attempt(db: sqlite3.Connection, run_id: str, iteration: int) -> int:
    """The latest attempt at `iteration` (0: never started)."""
    row = db.execute("SELECT MAX(attempt) FROM iterations WHERE run_id = ? AND iteration = ?",
                     (run_id, iteration)).fetchone()
    return row[0] or 0


def iteration_from_row(r: sqlite3.Row) -> IterationRecord:
    return IterationRecord(run_id=r["run_id"], iteration=r["iteration"], attempt=r["attempt"], stage=r["stage"],
                           prompt=r["prompt"], reason=r["reason"], best_before=r["best_before"],
                           started_at=datetime.fromisoformat(r["started_at"]), completed=bool(r["completed"]),
                           groups=[Group.model_validate(g) for g in json.loads(r["groups"] or "[]")])


def call_from_row(r: sqlite3.Row) -> CallRecord:
    return CallRecord(run_id=r["run_id"], seq=r["seq"], iteration=r["iteration"], request=json.loads(r["request"]),
                      response_raw=r["response_raw"], created_at=datetime.fromisoformat(r["created_at"]),
                      usage=None if r["prompt_tokens"] is None else Usage(
                          prompt_tokens=r["prompt_tokens"], completion_tokens=r["completion_tokens"] or 0,
                          cost_usd=r["cost_usd"] or 0.0))


# ---------------------------------------------------------------- from the files


class UnreadableRun(ValueError):
    """A run directory whose run.json cannot be read: skipped (and named) by sync and rebuild, never fatal."""


def read_run(d: Path) -> RunRecord:
    try:
        return RunRecord.model_validate_json((d / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UnreadableRun(f"{d / 'run.json'}: {why}") from None


def index_run_dir(db: sqlite3.Connection, candidates_dir: Path, d: Path, only_missing: bool) -> int:
    """Index run directory `d` (only what the index lacks, or all of it); returns the rows added."""
    added = 0
    if not only_missing:
        index_run(db, read_run(d))
        added += 1
    have_iter = {(r[0], r[1]) for r in db.execute("SELECT iteration, attempt FROM iterations WHERE run_id = ?",
                                                  (d.name,))}
    for p in sorted((d / "iterations").glob("i*.json")):
        rec = load(IterationRecord, p)
        if rec and (rec.iteration, rec.attempt) not in have_iter:
            index_iteration(db, rec)
            added += 1
    have_calls = {r[0] for r in db.execute("SELECT seq FROM calls WHERE run_id = ?", (d.name,))}
    for p in sorted((d / "calls").glob("*.json")):
        rec = load(CallRecord, p)
        if rec and rec.seq not in have_calls:
            index_call(db, rec)
            added += 1
    have_cands = {r[0] for r in db.execute("SELECT id FROM candidates WHERE run_id = ?", (d.name,))}
    for p in sorted(d.iterdir()):
        if not (p.is_dir() and not p.name.startswith(".") and (p / "candidate.json").is_file()):
            continue
        try:
            c, att = read_candidate(p)
        except (OSError, ValueError) as e:
            log.warning("skipping unreadable candidate %s: %s", p, e)
            continue
        if c.id not in have_cands:
            index_candidate(db, c, att, p.relative_to(candidates_dir).as_posix())
            added += 1
    return added


def rebuild(candidates_dir: Path, db_path: Path, skipped: list[str] | None = None) -> sqlite3.Connection:
    """Build a new index beside `db_path` from the files, then move it into place; returns it opened. Runs whose
    run.json cannot be read are left out and named in `skipped`."""
    skipped = skipped if skipped is not None else []
    candidates_dir.mkdir(parents=True, exist_ok=True)
    tmp = candidates_dir / f"{TMP_PREFIX}{INDEX_NAME}-{secrets.token_hex(4)}"
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        apply_migrations(conn)
        conn.execute("BEGIN IMMEDIATE")
        n = 0
        for d in run_dirs(candidates_dir):
            try:
                read_run(d)  # checked first: a broken run.json leaves none of its rows half-indexed
            except UnreadableRun as e:
                skipped.append(str(e))
                log.info("skipped %s", e)  # the caller names it (agent runs reindex)
                continue
            n += index_run_dir(conn, candidates_dir, d, only_missing=False)
        conn.execute("COMMIT")
    finally:
        conn.close()
    for suffix in ("-wal", "-shm"):
        Path(str(db_path) + suffix).unlink(missing_ok=True)
    os.replace(tmp, db_path)
    log.info("rebuilt %s from the files (%d rows)", db_path, n)
    return _connect(db_path)
