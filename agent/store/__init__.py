"""Runs and candidates on disk, with a SQLite index to query them. Over 400 lines because `Store` is the one writer of
both, its methods sharing the connection, the lock and the order files-then-index; the readers live in its modules.

The files under `candidates/` are the truth (their layout: `files.py`); `candidates/index.sqlite` (WAL, numbered
migrations from `agent/data/migrations/NNN_name.sql`) is an index that `Store.reindex()` can always rebuild from
them. `ncu` reports go to `profiles/<run_id>/<candidate_id>.ncu-rep`.

Crash safety: a candidate is written into a hidden temporary directory, every file fsynced, then renamed into
place in one step; only then is it indexed, in one transaction. A kill at any point therefore leaves either no
candidate or a complete one, and a complete one that missed its index row is picked up by `sync()`.

Modules, one job each (everything public is importable from `agent.store`):
    records      the pydantic records the store hands out (RunRecord, IterationRecord, CallRecord, ...)
    files        the on-disk layout: atomic writes, candidate folders, sweeping what a killed writer left
    migrations   agent/data/migrations/NNN_name.sql, applied once each
    index        the SQLite index: opening it, its rows in and out, rebuilding it from the files
    leaderboard  the ranking query
    (here)       Store: the facade that writes the files first, then indexes them
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path

from agent.errors import UserError
from agent.runconfig import RunConfig
from agent.schema import Answer, Candidate, EvalResult, Group, Profile, Usage
from agent.store import files, index
from agent.store.files import write_atomic
from agent.store.index import (
    DRAM_METRIC,
    DURATION_METRIC,
    INDEX_NAME,
    Transaction,
    longest_kernel_dram_pct,
)
from agent.store.leaderboard import leaderboard as _leaderboard
from agent.store.migrations import apply_migrations
from agent.store.records import (
    RUN_STATUSES,
    CallRecord,
    IterationRecord,
    LeaderRow,
    ResumeState,
    RunRecord,
    RunStatus,
)

__all__ = [
    "CallRecord", "DRAM_METRIC", "DURATION_METRIC", "INDEX_NAME", "IterationRecord", "LeaderRow", "RUN_STATUSES",
    "ResumeState", "RunRecord", "RunStatus", "Store", "apply_migrations", "longest_kernel_dram_pct", "write_atomic",
]

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Store:
    """Runs and candidates under `root` (candidates/ and profiles/); opening touches nothing until first use."""

    def __init__(self, root: Path | str = ".") -> None:
        self.root = Path(root)
        self.candidates_dir = self.root / "candidates"
        self.profiles_dir = self.root / "profiles"
        self.db_path = self.candidates_dir / INDEX_NAME
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self.skipped: list[str] = []  # run directories whose run.json could not be read ("path: why")

    # ------------------------------------------------------------ connection

    def exists(self) -> bool:
        """True when there is anything recorded here (read-only commands check this before opening)."""
        return self.db_path.exists() or any(files.run_dirs(self.candidates_dir))

    @property
    def writable(self) -> bool:
        """Whether this process may write here (False on a read-only mount or another user's folder)."""
        probe = self.candidates_dir if self.candidates_dir.exists() else self.root
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        return os.access(probe, os.W_OK)

    @property
    def db(self) -> sqlite3.Connection:
        if self._conn is None and self.candidates_dir.is_dir() and not self.writable:
            self._conn = index.open_readonly(self.candidates_dir, self.db_path, self.skipped)  # readers still read
        if self._conn is None:
            self._conn, fresh = index.open_index(self.candidates_dir, self.db_path)
            if fresh and any(files.run_dirs(self.candidates_dir)):  # the index was lost: fill it from the files
                log.info("index %s was missing: indexing the files", self.db_path)
                self.sync()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tx(self) -> Transaction:
        return Transaction(self.db, self._lock)

    def _attempt(self, run_id: str, iteration: int) -> int:
        return index.attempt(self.db, run_id, iteration)

    # ------------------------------------------------------------ runs

    def new_run_id(self) -> str:
        return f"{_now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"

    def create_run(self, config: RunConfig, gpu: str, device: str, versions: dict[str, str] | None = None) -> str:
        """Start a run: a fresh, sortable id (UTC time + random), candidates/<run>/run.json, an index row."""
        _ = self.db  # open (and create) the store first
        while True:
            run_id = self.new_run_id()
            try:
                (self.candidates_dir / run_id).mkdir()
                break
            except FileExistsError:
                continue
        record = RunRecord(id=run_id, config=config, gpu=gpu, device=device, started_at=_now(), pid=os.getpid(),
                           host=socket.gethostname(), versions=versions or {})
        self._save_run(record)
        return run_id

    def reopen_run(self, run_id: str, config: RunConfig | None = None) -> RunRecord:
        """Mark an existing run as running again in this process (for `--resume`), with `config` where given (more
        iterations, a new budget)."""
        record = self._stored_run(run_id)
        self._save_run(record.model_copy(update={"status": "running", "finished_at": None, "pid": os.getpid(),
                                                 "host": socket.gethostname(),
                                                 **({"config": config} if config is not None else {})}))
        return self.get_run(run_id)

    def get_run(self, run_id: str) -> RunRecord:
        """A run with its totals; an unknown id is a UserError naming recent runs (a unique prefix is enough)."""
        run_id = self.resolve_run(run_id)
        return index.run_from_row(self.db, self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone())

    def list_runs(self) -> list[RunRecord]:
        """All runs, newest first."""
        return [index.run_from_row(self.db, r) for r in self.db.execute("SELECT * FROM runs ORDER BY id DESC")]

    def resolve_run(self, run_id: str) -> str:
        ids = [r[0] for r in self.db.execute("SELECT id FROM runs ORDER BY id DESC")]
        if run_id in ids:
            return run_id
        # a unique prefix, or the random tag a compact table shows ('3fa2' for 20261123-214051-3fa2)
        matches = [i for i in ids if i.startswith(run_id) or i.endswith("-" + run_id)] if run_id else []
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UserError(f"run id {run_id!r} is ambiguous: {', '.join(matches[:5])}")
        if not ids:
            raise UserError(f"unknown run {run_id!r}: no runs under {self.candidates_dir}", "start one with `agent run`")
        more = f" (and {len(ids) - 5} older)" if len(ids) > 5 else ""
        raise UserError(f"unknown run {run_id!r}; recent runs: {', '.join(ids[:5])}{more}")

    def run_versions(self, run_id: str) -> dict[str, str]:
        """What the run was measured with (run.json's versions; empty for runs recorded before they were)."""
        return self._stored_run(self.resolve_run(run_id)).versions

    def finish_run(self, run_id: str, status: RunStatus = "finished", reason: str | None = None) -> None:
        """The run's end: its status, and for a stop or a failure why (one line)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        self._save_run(self._stored_run(run_id).model_copy(update={"status": status, "finished_at": _now(),
                                                                   "stop_reason": reason}))

    def set_best(self, run_id: str, candidate_id: str) -> None:
        files.write_run(self.candidates_dir, self._stored_run(run_id).model_copy(update={"best": candidate_id}))
        with self._tx() as db:
            db.execute("UPDATE runs SET best = ? WHERE id = ?", (candidate_id, run_id))

    def _stored_run(self, run_id: str) -> RunRecord:
        path = files.run_json(self.candidates_dir, run_id)
        if not path.is_file():
            self.resolve_run(run_id)  # raises the friendly error
            raise UserError(f"run {run_id!r} has no run.json under {self.candidates_dir}")
        return RunRecord.model_validate_json(path.read_text(encoding="utf-8"))

    def _save_run(self, record: RunRecord) -> None:
        """run.json first, then its index row."""
        files.write_run(self.candidates_dir, record)
        with self._tx() as db:
            index.index_run(db, record)

    # ------------------------------------------------------------ iterations and calls

    def record_iteration(self, run_id: str, iteration: int, stage: str, prompt: str, reason: str,
                         best_before: str | None, groups: list[Group] | None = None) -> IterationRecord:
        """Record the start of an iteration (a repeat after a resume becomes the next attempt) with its groups
        (agent.search: parent, stage, samples and prompt of each)."""
        attempt = self._attempt(run_id, iteration) + 1
        rec = IterationRecord(run_id=run_id, iteration=iteration, attempt=attempt, stage=stage, prompt=prompt,
                              reason=reason, best_before=best_before, started_at=_now(), groups=groups or [])
        files.write_iteration(self.candidates_dir, rec)
        with self._tx() as db:
            index.index_iteration(db, rec)
        return rec

    def end_iteration(self, run_id: str, iteration: int) -> None:
        """Mark the latest attempt at `iteration` complete (all candidates recorded, best chosen and profiled)."""
        attempt = self._attempt(run_id, iteration)
        if attempt == 0:
            raise ValueError(f"iteration {iteration} of {run_id} was never started")
        path = files.iteration_path(self.candidates_dir, run_id, iteration, attempt)
        rec = IterationRecord.model_validate_json(path.read_text(encoding="utf-8"))
        files.write_iteration(self.candidates_dir, rec.model_copy(update={"completed": True}))
        with self._tx() as db:
            db.execute("UPDATE iterations SET completed = 1 WHERE run_id = ? AND iteration = ? AND attempt = ?",
                       (run_id, iteration, attempt))

    def iterations(self, run_id: str) -> list[IterationRecord]:
        """The latest attempt at each iteration, in order."""
        run_id = self.resolve_run(run_id)
        rows = self.db.execute(
            "SELECT * FROM iterations i WHERE run_id = ? AND attempt = "
            "(SELECT MAX(attempt) FROM iterations j WHERE j.run_id = i.run_id AND j.iteration = i.iteration)"
            " ORDER BY iteration", (run_id,)).fetchall()
        return [index.iteration_from_row(r) for r in rows]

    def record_call(self, run_id: str, iteration: int, request: dict, response_raw: str,
                    usage: Usage | None) -> int:
        """Log one LLM HTTP exchange (the request as sent, the body as received); returns its sequence number."""
        calls_dir = files.calls_dir(self.candidates_dir, run_id)
        calls_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            taken = [int(p.stem) for p in calls_dir.glob("*.json") if p.stem.isdigit()]
            seq = max(taken, default=0) + 1
            rec = CallRecord(run_id=run_id, seq=seq, iteration=iteration, request=request, response_raw=response_raw,
                             usage=usage, created_at=_now())
            write_atomic(calls_dir / f"{seq:06d}.json", rec.model_dump_json(indent=2) + "\n")
        with self._tx() as db:
            index.index_call(db, rec)
        return seq

    def calls(self, run_id: str) -> list[CallRecord]:
        run_id = self.resolve_run(run_id)
        rows = self.db.execute("SELECT * FROM calls WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
        return [index.call_from_row(r) for r in rows]

    # ------------------------------------------------------------ candidates

    def candidate_id(self, run_id: str, iteration: int, index: int) -> str:
        """`<run>-i<iteration>-c<index>`; a resumed iteration's second attempt is `<run>-i<iteration>a2-c<index>`."""
        attempt = max(self._attempt(run_id, iteration), 1)
        return f"{run_id}-{files.candidate_suffix(iteration, attempt, index)}"

    def record_candidate(self, c: Candidate) -> None:
        """Write the candidate's files (all or nothing: temp dir, fsync, rename), then index it in one transaction."""
        attempt = max(self._attempt(c.run_id, c.iteration), 1)
        prefix = f"{c.run_id}-"
        suffix = c.id[len(prefix):] if c.id.startswith(prefix) else c.id
        final = files.write_candidate(self.candidates_dir / c.run_id, suffix, c, attempt)
        with self._tx() as db:
            index.index_candidate(db, c, attempt, final.relative_to(self.candidates_dir).as_posix())

    def update_profile(self, candidate_id: str, profile: Profile) -> None:
        """Attach a profile taken after evaluation: profile.json replaced atomically, metrics re-indexed."""
        c = self.get_candidate(candidate_id)
        write_atomic(self._candidate_dir(c.id) / "profile.json", profile.model_dump_json(indent=2) + "\n")
        with self._tx() as db:
            index.index_profile(db, c.id, profile)

    def update_result(self, candidate_id: str, result: EvalResult) -> None:
        """Replace a candidate's verdict after the fact (a best whose timing failed the cross-check): result.json
        replaced atomically, the index row rewritten."""
        c = self.get_candidate(candidate_id).model_copy(update={"result": result})
        d = self._candidate_dir(c.id)
        write_atomic(d / "result.json", result.model_dump_json(indent=2) + "\n")
        with self._tx() as db:
            attempt = db.execute("SELECT attempt FROM candidates WHERE id = ?", (c.id,)).fetchone()
            index.index_candidate(db, c, attempt[0] if attempt else 1, d.relative_to(self.candidates_dir).as_posix())

    def get_candidate(self, candidate_id: str) -> Candidate:
        """One candidate, read from its files; an unknown id is a UserError (a unique prefix is enough)."""
        return files.read_candidate(self._candidate_dir(self.resolve_candidate(candidate_id)))[0]

    def candidates(self, run_id: str) -> list[Candidate]:
        """Every candidate of a run, in recorded order (iteration, attempt, index)."""
        run_id = self.resolve_run(run_id)
        rows = self.db.execute(
            "SELECT dir FROM candidates WHERE run_id = ? ORDER BY iteration, attempt, idx", (run_id,)).fetchall()
        return [files.read_candidate(self.candidates_dir / r["dir"])[0] for r in rows]

    def answers(self, run_id: str) -> list[Answer]:
        """The proposer's answers in recorded order, what ReplayProposer serves: iterations >= 1 (iteration 0 is the
        starting kernel, not a proposal), the latest attempt of each iteration only."""
        run_id = self.resolve_run(run_id)
        rows = self.db.execute(
            "SELECT dir FROM candidates c WHERE run_id = ? AND iteration >= 1 AND attempt = "
            "(SELECT MAX(attempt) FROM candidates d WHERE d.run_id = c.run_id AND d.iteration = c.iteration)"
            " ORDER BY iteration, idx", (run_id,)).fetchall()
        out = []
        for r in rows:
            c = files.read_candidate(self.candidates_dir / r["dir"])[0]
            if c.answer is not None:
                out.append(c.answer)
        return out

    def resolve_candidate(self, candidate_id: str) -> str:
        if self.db.execute("SELECT 1 FROM candidates WHERE id = ?", (candidate_id,)).fetchone():
            return candidate_id
        matches: list[str] = []
        if candidate_id:  # a unique prefix, else a unique tail ('3fa2-i3-c1', as the compact leaderboard shows)
            like = candidate_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            for pattern in (like + "%", "%-" + like):
                matches = [r[0] for r in self.db.execute(
                    "SELECT id FROM candidates WHERE id LIKE ? ESCAPE '\\' ORDER BY id LIMIT 6", (pattern,))]
                if matches:
                    break
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UserError(f"candidate id {candidate_id!r} is ambiguous: {', '.join(matches[:5])}")
        recent = [r[0] for r in self.db.execute("SELECT id FROM candidates ORDER BY created_at DESC LIMIT 3")]
        if not recent:
            raise UserError(f"unknown candidate {candidate_id!r}: no candidates under {self.candidates_dir}",
                            "start a run with `agent run`")
        raise UserError(f"unknown candidate {candidate_id!r}; recent: {', '.join(recent)}",
                        "`agent leaderboard --all` lists them")

    def _candidate_dir(self, candidate_id: str) -> Path:
        row = self.db.execute("SELECT dir FROM candidates WHERE id = ?", (candidate_id,)).fetchone()
        if row is None:
            self.resolve_candidate(candidate_id)  # raises the friendly error
        return self.candidates_dir / row["dir"]

    def profile_path(self, run_id: str, candidate_id: str) -> Path:
        """Where the candidate's .ncu-rep goes: profiles/<run>/<candidate>.ncu-rep (directory created)."""
        d = self.profiles_dir / run_id
        d.mkdir(parents=True, exist_ok=True)
        return d / f"{candidate_id}.ncu-rep"

    # ------------------------------------------------------------ resume and leaderboard

    def resume_state(self, run_id: str) -> ResumeState:
        """Where `run_id` stopped: last complete iteration, best, stage, spend, and any half-done iteration."""
        run_id = self.resolve_run(run_id)
        self.sync(run_id)
        row = self.db.execute("SELECT status, best FROM runs WHERE id = ?", (run_id,)).fetchone()
        last, stage = index.last_complete(self.db, run_id, row["status"])
        started = self.db.execute("SELECT MAX(iteration) FROM iterations WHERE run_id = ?", (run_id,)).fetchone()[0]
        pending_iteration = started if started is not None and started > last else None
        pending: list[Candidate] = []
        if pending_iteration is not None:
            attempt = self._attempt(run_id, pending_iteration)
            rows = self.db.execute(
                "SELECT dir FROM candidates WHERE run_id = ? AND iteration = ? AND attempt = ? ORDER BY idx",
                (run_id, pending_iteration, attempt)).fetchall()
            pending = [files.read_candidate(self.candidates_dir / r["dir"])[0] for r in rows]
        return ResumeState(run_id=run_id, last_iteration=last, best=row["best"], stage=stage,
                           usage=index.usage(self.db, run_id), pending_iteration=pending_iteration, pending=pending)

    def leaderboard(self, problem: str | None = None, run: str | None = None, stage: str | None = None,
                    include_all: bool = False, limit: int | None = None) -> list[LeaderRow]:
        """Candidates ranked by time within each problem and device; correct only unless include_all (then failures
        last)."""
        return _leaderboard(self.db, problem=problem, run_id=self.resolve_run(run) if run else None, stage=stage,
                            include_all=include_all, limit=limit)

    # ------------------------------------------------------------ recovery

    def sync(self, run_id: str | None = None) -> int:
        """Index what the files hold and the index lacks (a kill between rename and commit); returns rows added."""
        added = 0
        dirs = [self.candidates_dir / run_id] if run_id else list(files.run_dirs(self.candidates_dir))
        known_runs = {r[0] for r in self.db.execute("SELECT id FROM runs")}
        with self._tx() as db:
            for d in dirs:
                if not (d / "run.json").is_file():
                    continue
                if d.name not in known_runs:
                    try:
                        index.read_run(d)
                    except index.UnreadableRun as e:  # the other runs stay visible; this one is named
                        self.skipped.append(str(e))
                        log.warning("skipped %s", e)
                        continue
                files.sweep(d)
                added += index.index_run_dir(db, self.candidates_dir, d, only_missing=d.name in known_runs)
        return added

    def reindex(self) -> int:
        """Rebuild index.sqlite from the files (the db was lost or corrupt); returns the candidates indexed."""
        with self._lock:
            self.close()
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.db_path) + suffix).unlink(missing_ok=True)
            self._conn = index.rebuild(self.candidates_dir, self.db_path, self.skipped)
            return self.db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]
