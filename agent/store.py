"""Runs and candidates on disk, with a SQLite index to query them.

The files under `candidates/` are the truth; `candidates/index.sqlite` (WAL, numbered migrations from
`agent/data/migrations/NNN_name.sql`) is an index that `Store.reindex()` can always rebuild from them.

    candidates/
      index.sqlite
      <run_id>/run.json                      RunRecord's stored part (config, status, best, ...)
      <run_id>/iterations/i0003-a1.json      each attempt at an iteration: prompt, why this stage
      <run_id>/calls/000001.json             every LLM HTTP exchange, request and raw response
      <run_id>/i3-c1/                        one candidate: code.py prompt.md response.md response.json
                                             result.json profile.json candidate.json
    profiles/<run_id>/<candidate_id>.ncu-rep

Crash safety: a candidate is written into a hidden temporary directory, every file fsynced, then renamed into
place in one step; only then is it indexed, in one transaction. A kill at any point therefore leaves either no
candidate or a complete one, and a complete one that missed its index row is picked up by `sync()`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import socket
import sqlite3
import threading
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import Field

from agent.errors import UserError
from agent.schema import Answer, Candidate, EvalResult, Model, Profile, RunConfig, Usage, Verdict

log = logging.getLogger(__name__)

RunStatus = Literal["running", "finished", "failed", "interrupted"]
RUN_STATUSES: tuple[str, ...] = ("running", "finished", "failed", "interrupted")

DRAM_METRIC = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
DURATION_METRIC = "gpu__time_duration.sum"
INDEX_NAME = "index.sqlite"
_TMP_PREFIX = ".tmp-"


# ---------------------------------------------------------------- records


class RunRecord(Model):
    """A run as stored in run.json, plus totals derived from its candidates and calls."""

    id: str
    config: RunConfig
    gpu: str
    device: str
    status: RunStatus = "running"
    started_at: datetime
    finished_at: datetime | None = None
    best: str | None = Field(default=None, description="candidate id of the current best")
    pid: int | None = Field(default=None, description="process running it, to tell 'running' from 'interrupted'")
    host: str | None = None
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
    rank: int
    candidate: str
    run: str
    problem: str
    stage: str
    iteration: int
    verdict: Verdict
    candidate_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    dram_pct: float | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    meaningful: bool | None = Field(default=None, description="False for CPU-mode timings")
    device: str | None = None


# ---------------------------------------------------------------- helpers


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(t: datetime | None) -> str | None:
    return t.astimezone(timezone.utc).isoformat() if t else None


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # some platforms cannot open directories; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_file(path: Path, text: str) -> None:
    """Write and fsync one file (no rename: callers rename the file or its directory)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step: temp file in the same directory, fsync, os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{_TMP_PREFIX}{path.name}-{secrets.token_hex(4)}")
    try:
        _write_file(tmp, text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def longest_kernel_dram_pct(profile: Profile | None) -> float | None:
    """DRAM throughput (% of peak) of the profile's longest kernel: the one that decides the time."""
    if profile is None or not profile.kernels:
        return None
    kernels = list(profile.kernels.values())
    longest = max(kernels, key=lambda k: float(k.metrics.get(DURATION_METRIC, -1.0)))
    if DRAM_METRIC in longest.metrics:
        return float(longest.metrics[DRAM_METRIC])
    with_dram = [k for k in kernels if DRAM_METRIC in k.metrics]
    return float(with_dram[0].metrics[DRAM_METRIC]) if with_dram else None


def _migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of the packaged migrations, in order."""
    out = []
    for entry in resources.files("agent").joinpath("data", "migrations").iterdir():
        m = re.match(r"^(\d+)_(\w+)\.sql$", entry.name)
        if m:
            out.append((int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    return sorted(out)


def apply_migrations(conn: sqlite3.Connection, migrations: list[tuple[int, str, str]] | None = None) -> list[int]:
    """Apply the migrations not yet recorded in schema_migrations, each all-or-nothing; return their versions.

    Each one runs under BEGIN IMMEDIATE and re-checks schema_migrations inside it, so that two processes opening
    a fresh store at once apply it once (executescript would commit first and drop that lock).
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    applied = []
    for version, name, sql in migrations if migrations is not None else _migrations():
        if conn.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (version,)).fetchone():
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (version,)).fetchone():
                conn.execute("ROLLBACK")  # another process got there first
                continue
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, _iso(_now())))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        applied.append(version)
        log.info("applied migration %03d_%s", version, name)
    return applied


def _statements(sql: str) -> Iterator[str]:
    """Split a script into complete statements (sqlite3.complete_statement knows about strings and triggers)."""
    buf = ""
    parts = sql.split(";")
    for part in parts[:-1]:
        buf += part + ";"
        if sqlite3.complete_statement(buf):
            yield buf
            buf = ""
    buf += parts[-1]
    if any(l.strip() and not l.strip().startswith("--") for l in buf.splitlines()):  # noqa: E741
        yield buf  # an unterminated last statement: let sqlite say what is wrong with it


# ---------------------------------------------------------------- the store


class Store:
    """Runs and candidates under `root` (candidates/ and profiles/); opening touches nothing until first use."""

    def __init__(self, root: Path | str = ".") -> None:
        self.root = Path(root)
        self.candidates_dir = self.root / "candidates"
        self.profiles_dir = self.root / "profiles"
        self.db_path = self.candidates_dir / INDEX_NAME
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()

    # ------------------------------------------------------------ connection

    def exists(self) -> bool:
        """True when there is anything recorded here (read-only commands check this before opening)."""
        return self.db_path.exists() or any(self._run_dirs())

    @property
    def db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn, fresh = self._open()
            if fresh and any(self._run_dirs()):  # the index was lost: fill it from the files, in place
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

    def _connect(self, path: Path) -> sqlite3.Connection:
        return self._configure(sqlite3.connect(path, isolation_level=None, timeout=30.0, check_same_thread=False))

    @staticmethod
    def _configure(conn: sqlite3.Connection) -> sqlite3.Connection:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across app crashes; files are the truth anyway
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _open(self) -> tuple[sqlite3.Connection, bool]:
        """The connection, migrated; and whether this call created the schema (the index was new or lost)."""
        self.candidates_dir.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.db_path, isolation_level=None, timeout=30.0, check_same_thread=False)
        try:
            self._configure(conn)
            applied = apply_migrations(conn)
            conn.execute("SELECT COUNT(*) FROM runs").fetchone()
        except sqlite3.OperationalError:  # locked, read-only, a bad migration: not a reason to rebuild
            conn.close()
            raise
        except sqlite3.DatabaseError as e:  # "not a database", "malformed": the files can rebuild it
            log.warning("index %s is unreadable (%s): rebuilding it from the files", self.db_path, e)
            conn.close()
            self._quarantine_db()
            return self._rebuild(), False
        first = min((v for v, _, _ in _migrations()), default=None)
        # concurrent openers of a fresh store: only the one that applied the first migration syncs
        return conn, first is not None and first in applied

    def _quarantine_db(self) -> None:
        stamp = _now().strftime("%Y%m%d-%H%M%S")
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.db_path) + suffix)
            if p.exists():
                os.replace(p, p.with_name(f"{p.name}.corrupt-{stamp}"))

    def _tx(self) -> _Transaction:
        return _Transaction(self.db, self._lock)

    # ------------------------------------------------------------ runs

    def _run_dirs(self) -> Iterator[Path]:
        if not self.candidates_dir.is_dir():
            return iter(())
        return (p for p in sorted(self.candidates_dir.iterdir()) if p.is_dir() and (p / "run.json").is_file())

    def new_run_id(self) -> str:
        return f"{_now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"

    def create_run(self, config: RunConfig, gpu: str, device: str) -> str:
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
                           host=socket.gethostname())
        self._write_run(record)
        with self._tx() as db:
            self._index_run(db, record)
        return run_id

    def reopen_run(self, run_id: str) -> RunRecord:
        """Mark an existing run as running again in this process (for `--resume`)."""
        record = self._stored_run(run_id)
        record = record.model_copy(update={"status": "running", "finished_at": None, "pid": os.getpid(),
                                           "host": socket.gethostname()})
        self._write_run(record)
        with self._tx() as db:
            self._index_run(db, record)
        return self.get_run(run_id)

    def get_run(self, run_id: str) -> RunRecord:
        """A run with its totals; an unknown id is a UserError naming recent runs (a unique prefix is enough)."""
        run_id = self.resolve_run(run_id)
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return self._run_from_row(row)

    def list_runs(self) -> list[RunRecord]:
        """All runs, newest first."""
        return [self._run_from_row(r) for r in self.db.execute("SELECT * FROM runs ORDER BY id DESC")]

    def resolve_run(self, run_id: str) -> str:
        ids = [r[0] for r in self.db.execute("SELECT id FROM runs ORDER BY id DESC")]
        if run_id in ids:
            return run_id
        matches = [i for i in ids if i.startswith(run_id)] if run_id else []
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UserError(f"run id {run_id!r} is ambiguous: {', '.join(matches[:5])}")
        if not ids:
            raise UserError(f"unknown run {run_id!r}: no runs under {self.candidates_dir}", "start one with `agent run`")
        more = f" (and {len(ids) - 5} older)" if len(ids) > 5 else ""
        raise UserError(f"unknown run {run_id!r}; recent runs: {', '.join(ids[:5])}{more}")

    def finish_run(self, run_id: str, status: RunStatus = "finished") -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        record = self._stored_run(run_id).model_copy(update={"status": status, "finished_at": _now()})
        self._write_run(record)
        with self._tx() as db:
            self._index_run(db, record)

    def set_best(self, run_id: str, candidate_id: str) -> None:
        record = self._stored_run(run_id).model_copy(update={"best": candidate_id})
        self._write_run(record)
        with self._tx() as db:
            db.execute("UPDATE runs SET best = ? WHERE id = ?", (candidate_id, run_id))

    def _stored_run(self, run_id: str) -> RunRecord:
        path = self.candidates_dir / run_id / "run.json"
        if not path.is_file():
            self.resolve_run(run_id)  # raises the friendly error
            raise UserError(f"run {run_id!r} has no run.json under {self.candidates_dir}")
        return RunRecord.model_validate_json(path.read_text(encoding="utf-8"))

    def _write_run(self, record: RunRecord) -> None:
        stored = record.model_dump(mode="json", exclude={"usage", "iterations", "candidates"})
        write_atomic(self.candidates_dir / record.id / "run.json", json.dumps(stored, indent=2) + "\n")

    @staticmethod
    def _index_run(db: sqlite3.Connection, r: RunRecord) -> None:
        db.execute(
            # an upsert, not INSERT OR REPLACE: replacing the row would cascade-delete the run's candidates
            "INSERT INTO runs (id, problem, stage, gpu, device, llm, model, status, started_at, finished_at,"
            " best, pid, host, config) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET"
            " problem=excluded.problem, stage=excluded.stage, gpu=excluded.gpu, device=excluded.device,"
            " llm=excluded.llm, model=excluded.model, status=excluded.status, started_at=excluded.started_at,"
            " finished_at=excluded.finished_at, best=excluded.best, pid=excluded.pid, host=excluded.host,"
            " config=excluded.config",
            (r.id, r.config.problem, r.config.stage, r.gpu, r.device, r.config.llm, r.config.model, r.status,
             _iso(r.started_at), _iso(r.finished_at), r.best, r.pid, r.host, r.config.model_dump_json()),
        )

    def _run_from_row(self, row: sqlite3.Row) -> RunRecord:
        status = row["status"]
        if status == "running" and not _alive(row["pid"], row["host"]):
            status = "interrupted"  # its process is gone without saying goodbye: killed or crashed
        usage = self._usage(row["id"])
        return RunRecord(
            id=row["id"], config=RunConfig.model_validate_json(row["config"]), gpu=row["gpu"], device=row["device"],
            status=status, started_at=datetime.fromisoformat(row["started_at"]),
            finished_at=datetime.fromisoformat(row["finished_at"]) if row["finished_at"] else None,
            best=row["best"], pid=row["pid"], host=row["host"], usage=usage,
            iterations=max(self._last_complete(row["id"], row["status"])[0], 0),
            candidates=self.db.execute("SELECT COUNT(*) FROM candidates WHERE run_id = ?", (row["id"],)).fetchone()[0],
        )

    def _usage(self, run_id: str) -> Usage:
        u = self.db.execute("SELECT * FROM usage WHERE run_id = ?", (run_id,)).fetchone()
        if u is None:
            return Usage()
        return Usage(prompt_tokens=u["prompt_tokens"], completion_tokens=u["completion_tokens"], cost_usd=u["cost_usd"])

    # ------------------------------------------------------------ iterations and calls

    def record_iteration(self, run_id: str, iteration: int, stage: str, prompt: str, reason: str,
                         best_before: str | None) -> IterationRecord:
        """Record the start of an iteration (a repeat after a resume becomes the next attempt)."""
        attempt = self._attempt(run_id, iteration) + 1
        rec = IterationRecord(run_id=run_id, iteration=iteration, attempt=attempt, stage=stage, prompt=prompt,
                              reason=reason, best_before=best_before, started_at=_now())
        self._write_iteration(rec)
        with self._tx() as db:
            self._index_iteration(db, rec)
        return rec

    def end_iteration(self, run_id: str, iteration: int) -> None:
        """Mark the latest attempt at `iteration` complete (all candidates recorded, best chosen and profiled)."""
        attempt = self._attempt(run_id, iteration)
        if attempt == 0:
            raise ValueError(f"iteration {iteration} of {run_id} was never started")
        path = self._iteration_path(run_id, iteration, attempt)
        rec = IterationRecord.model_validate_json(path.read_text(encoding="utf-8"))
        self._write_iteration(rec.model_copy(update={"completed": True}))
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
        return [self._iteration_from_row(r) for r in rows]

    def record_call(self, run_id: str, iteration: int, request: dict, response_raw: str,
                    usage: Usage | None) -> int:
        """Log one LLM HTTP exchange (the request as sent, the body as received); returns its sequence number."""
        calls_dir = self.candidates_dir / run_id / "calls"
        calls_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            taken = [int(p.stem) for p in calls_dir.glob("*.json") if p.stem.isdigit()]
            seq = max(taken, default=0) + 1
            rec = CallRecord(run_id=run_id, seq=seq, iteration=iteration, request=request, response_raw=response_raw,
                             usage=usage, created_at=_now())
            write_atomic(calls_dir / f"{seq:06d}.json", rec.model_dump_json(indent=2) + "\n")
        with self._tx() as db:
            self._index_call(db, rec)
        return seq

    def calls(self, run_id: str) -> list[CallRecord]:
        run_id = self.resolve_run(run_id)
        rows = self.db.execute("SELECT * FROM calls WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
        return [
            CallRecord(run_id=r["run_id"], seq=r["seq"], iteration=r["iteration"], request=json.loads(r["request"]),
                       response_raw=r["response_raw"], created_at=datetime.fromisoformat(r["created_at"]),
                       usage=None if r["prompt_tokens"] is None else Usage(
                           prompt_tokens=r["prompt_tokens"], completion_tokens=r["completion_tokens"] or 0,
                           cost_usd=r["cost_usd"] or 0.0))
            for r in rows
        ]

    def _attempt(self, run_id: str, iteration: int) -> int:
        row = self.db.execute("SELECT MAX(attempt) FROM iterations WHERE run_id = ? AND iteration = ?",
                              (run_id, iteration)).fetchone()
        return row[0] or 0

    def _iteration_path(self, run_id: str, iteration: int, attempt: int) -> Path:
        return self.candidates_dir / run_id / "iterations" / f"i{iteration:04d}-a{attempt}.json"

    def _write_iteration(self, rec: IterationRecord) -> None:
        write_atomic(self._iteration_path(rec.run_id, rec.iteration, rec.attempt), rec.model_dump_json(indent=2) + "\n")

    @staticmethod
    def _index_iteration(db: sqlite3.Connection, r: IterationRecord) -> None:
        db.execute(
            "INSERT OR REPLACE INTO iterations (run_id, iteration, attempt, stage, prompt, reason, best_before,"
            " started_at, completed) VALUES (?,?,?,?,?,?,?,?,?)",
            (r.run_id, r.iteration, r.attempt, r.stage, r.prompt, r.reason, r.best_before, _iso(r.started_at),
             int(r.completed)),
        )

    @staticmethod
    def _iteration_from_row(r: sqlite3.Row) -> IterationRecord:
        return IterationRecord(run_id=r["run_id"], iteration=r["iteration"], attempt=r["attempt"], stage=r["stage"],
                               prompt=r["prompt"], reason=r["reason"], best_before=r["best_before"],
                               started_at=datetime.fromisoformat(r["started_at"]), completed=bool(r["completed"]))

    @staticmethod
    def _index_call(db: sqlite3.Connection, r: CallRecord) -> None:
        u = r.usage
        db.execute(
            "INSERT OR REPLACE INTO calls (run_id, seq, iteration, request, response_raw, prompt_tokens,"
            " completion_tokens, cost_usd, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
            (r.run_id, r.seq, r.iteration, json.dumps(r.request), r.response_raw, u.prompt_tokens if u else None,
             u.completion_tokens if u else None, u.cost_usd if u else None, _iso(r.created_at)),
        )

    # ------------------------------------------------------------ candidates

    def candidate_id(self, run_id: str, iteration: int, index: int) -> str:
        """`<run>-i<iteration>-c<index>`; a resumed iteration's second attempt is `<run>-i<iteration>a2-c<index>`."""
        attempt = max(self._attempt(run_id, iteration), 1)
        return f"{run_id}-{_suffix(iteration, attempt, index)}"

    def record_candidate(self, c: Candidate) -> None:
        """Write the candidate's files (all or nothing: temp dir, fsync, rename), then index it in one transaction."""
        attempt = max(self._attempt(c.run_id, c.iteration), 1)
        prefix = f"{c.run_id}-"
        suffix = c.id[len(prefix):] if c.id.startswith(prefix) else c.id
        run_dir = self.candidates_dir / c.run_id
        final = run_dir / suffix
        tmp = run_dir / f"{_TMP_PREFIX}{suffix}-{secrets.token_hex(4)}"
        tmp.mkdir(parents=True)
        try:
            for name, text in _candidate_files(c, attempt).items():
                _write_file(tmp / name, text)
            _fsync_dir(tmp)
            if final.exists():  # re-recording an id replaces it (never expected from the loop)
                old = run_dir / f"{_TMP_PREFIX}old-{suffix}-{secrets.token_hex(4)}"
                os.replace(final, old)
                shutil.rmtree(old, ignore_errors=True)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        _fsync_dir(run_dir)
        with self._tx() as db:
            self._index_candidate(db, c, attempt, final.relative_to(self.candidates_dir).as_posix())

    def update_profile(self, candidate_id: str, profile: Profile) -> None:
        """Attach a profile taken after evaluation: profile.json replaced atomically, metrics re-indexed."""
        c = self.get_candidate(candidate_id)
        path = self._candidate_dir(c.id)
        write_atomic(path / "profile.json", profile.model_dump_json(indent=2) + "\n")
        with self._tx() as db:
            db.execute("UPDATE candidates SET dram_pct = ?, bottleneck = ? WHERE id = ?",
                       (longest_kernel_dram_pct(profile), profile.bottleneck.kind if profile.bottleneck else None, c.id))
            self._index_metrics(db, c.id, profile)

    def get_candidate(self, candidate_id: str) -> Candidate:
        """One candidate, read from its files; an unknown id is a UserError (a unique prefix is enough)."""
        return _read_candidate(self._candidate_dir(self.resolve_candidate(candidate_id)))[0]

    def candidates(self, run_id: str) -> list[Candidate]:
        """Every candidate of a run, in recorded order (iteration, attempt, index)."""
        run_id = self.resolve_run(run_id)
        rows = self.db.execute(
            "SELECT dir FROM candidates WHERE run_id = ? ORDER BY iteration, attempt, idx", (run_id,)).fetchall()
        return [_read_candidate(self.candidates_dir / r["dir"])[0] for r in rows]

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
            c = _read_candidate(self.candidates_dir / r["dir"])[0]
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

    def _index_candidate(self, db: sqlite3.Connection, c: Candidate, attempt: int, rel_dir: str) -> None:
        t = c.result.timing
        u = c.answer.usage if c.answer else Usage()
        db.execute(
            "INSERT OR REPLACE INTO candidates (id, run_id, iteration, attempt, idx, dir, stage, verdict, message,"
            " candidate_ms, spread_pct, eager_ms, compile_ms, speedup_vs_eager, speedup_vs_compile, meaningful,"
            " device, model, prompt_tokens, completion_tokens, cost_usd, dram_pct, bottleneck, created_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (c.id, c.run_id, c.iteration, attempt, c.index, rel_dir, c.stage, str(c.result.verdict), c.result.message,
             t.candidate_ms if t else None, t.candidate_spread_pct if t else None, t.eager_ms if t else None,
             t.compile_ms if t else None, t.speedup_vs_eager if t else None, t.speedup_vs_compile if t else None,
             int(t.meaningful) if t else None, c.result.device, c.answer.model if c.answer else None,
             u.prompt_tokens, u.completion_tokens, u.cost_usd, longest_kernel_dram_pct(c.profile),
             c.profile.bottleneck.kind if c.profile and c.profile.bottleneck else None, _iso(c.created_at)),
        )
        self._index_metrics(db, c.id, c.profile)

    @staticmethod
    def _index_metrics(db: sqlite3.Connection, candidate_id: str, profile: Profile | None) -> None:
        db.execute("DELETE FROM metrics WHERE candidate_id = ?", (candidate_id,))
        if profile is None:
            return
        db.executemany(
            "INSERT INTO metrics (candidate_id, kernel, metric, value) VALUES (?,?,?,?)",
            [(candidate_id, k, m, float(v)) for k, kp in profile.kernels.items() for m, v in kp.metrics.items()],
        )

    # ------------------------------------------------------------ resume

    def resume_state(self, run_id: str) -> ResumeState:
        """Where `run_id` stopped: last complete iteration, best, stage, spend, and any half-done iteration."""
        run_id = self.resolve_run(run_id)
        self.sync(run_id)
        row = self.db.execute("SELECT status, best FROM runs WHERE id = ?", (run_id,)).fetchone()
        last, stage = self._last_complete(run_id, row["status"])
        started = self.db.execute("SELECT MAX(iteration) FROM iterations WHERE run_id = ?", (run_id,)).fetchone()[0]
        pending_iteration = started if started is not None and started > last else None
        pending: list[Candidate] = []
        if pending_iteration is not None:
            attempt = self._attempt(run_id, pending_iteration)
            rows = self.db.execute(
                "SELECT dir FROM candidates WHERE run_id = ? AND iteration = ? AND attempt = ? ORDER BY idx",
                (run_id, pending_iteration, attempt)).fetchall()
            pending = [_read_candidate(self.candidates_dir / r["dir"])[0] for r in rows]
        return ResumeState(run_id=run_id, last_iteration=last, best=row["best"], stage=stage,
                           usage=self._usage(run_id), pending_iteration=pending_iteration, pending=pending)

    def _last_complete(self, run_id: str, status: str) -> tuple[int, str | None]:
        """An iteration is complete when marked so, when a later one began, or when the run ended."""
        rows = self.db.execute(
            "SELECT iteration, stage, completed FROM iterations i WHERE run_id = ? AND attempt = "
            "(SELECT MAX(attempt) FROM iterations j WHERE j.run_id = i.run_id AND j.iteration = i.iteration)"
            " ORDER BY iteration", (run_id,)).fetchall()
        last, stage = -1, None
        for n, r in enumerate(rows):
            later = n + 1 < len(rows)
            if r["completed"] or later or status in ("finished", "failed"):
                last, stage = r["iteration"], r["stage"]
        return last, stage

    # ------------------------------------------------------------ leaderboard

    def leaderboard(self, problem: str | None = None, run: str | None = None, stage: str | None = None,
                    include_all: bool = False, limit: int | None = None) -> list[LeaderRow]:
        """Candidates ranked by speedup vs eager, then time; correct only unless include_all (then failures last)."""
        where, params = [], []
        if not include_all:
            where.append("c.verdict = ?")
            params.append(str(Verdict.CORRECT))
        if problem:
            where.append("r.problem = ?")
            params.append(problem)
        if run:
            where.append("c.run_id = ?")
            params.append(self.resolve_run(run))
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
                iteration=r["iteration"], verdict=Verdict(r["verdict"]), candidate_ms=r["candidate_ms"],
                eager_ms=r["eager_ms"], compile_ms=r["compile_ms"], speedup_vs_eager=r["speedup_vs_eager"],
                speedup_vs_compile=r["speedup_vs_compile"], dram_pct=r["dram_pct"],
                tokens=r["prompt_tokens"] + r["completion_tokens"], cost_usd=r["cost_usd"],
                meaningful=None if r["meaningful"] is None else bool(r["meaningful"]), device=r["device"],
            )
            for rank, r in enumerate(self.db.execute(sql, params).fetchall(), start=1)
        ]

    # ------------------------------------------------------------ recovery

    def sync(self, run_id: str | None = None) -> int:
        """Index what the files hold and the index lacks (a kill between rename and commit); returns rows added."""
        added = 0
        dirs = [self.candidates_dir / run_id] if run_id else list(self._run_dirs())
        known_runs = {r[0] for r in self.db.execute("SELECT id FROM runs")}
        with self._tx() as db:
            for d in dirs:
                if not (d / "run.json").is_file():
                    continue
                self._sweep(d)
                if d.name not in known_runs:
                    added += self._index_run_dir(db, d, only_missing=False)
                else:
                    added += self._index_run_dir(db, d, only_missing=True)
        return added

    def _sweep(self, d: Path) -> None:
        """Remove the temp files a killed writer left in a run directory, once its process is gone."""
        run = _load(RunRecord, d / "run.json")
        if run is None or (run.status == "running" and _alive(run.pid, run.host)):
            return  # someone may be writing there right now
        for p in d.glob(f"{_TMP_PREFIX}*"):
            log.info("removing %s, left by an interrupted write", p)
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)

    def reindex(self) -> int:
        """Rebuild index.sqlite from the files (the db was lost or corrupt); returns the candidates indexed."""
        with self._lock:
            self.close()
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.db_path) + suffix).unlink(missing_ok=True)
            self._conn = self._rebuild()
            return self.db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]

    def _rebuild(self) -> sqlite3.Connection:
        """Build a new index beside the old path from the files, then move it into place."""
        self.candidates_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.candidates_dir / f"{_TMP_PREFIX}{INDEX_NAME}-{secrets.token_hex(4)}"
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.row_factory = sqlite3.Row
            apply_migrations(conn)
            conn.execute("BEGIN IMMEDIATE")
            n = sum(self._index_run_dir(conn, d, only_missing=False) for d in self._run_dirs())
            conn.execute("COMMIT")
        finally:
            conn.close()
        for suffix in ("-wal", "-shm"):
            Path(str(self.db_path) + suffix).unlink(missing_ok=True)
        os.replace(tmp, self.db_path)
        log.info("rebuilt %s from the files (%d rows)", self.db_path, n)
        return self._connect(self.db_path)

    def _index_run_dir(self, db: sqlite3.Connection, d: Path, only_missing: bool) -> int:
        added = 0
        if not only_missing:
            self._index_run(db, RunRecord.model_validate_json((d / "run.json").read_text(encoding="utf-8")))
            added += 1
        have_iter = {(r[0], r[1]) for r in db.execute("SELECT iteration, attempt FROM iterations WHERE run_id = ?",
                                                      (d.name,))}
        for p in sorted((d / "iterations").glob("i*.json")):
            rec = _load(IterationRecord, p)
            if rec and (rec.iteration, rec.attempt) not in have_iter:
                self._index_iteration(db, rec)
                added += 1
        have_calls = {r[0] for r in db.execute("SELECT seq FROM calls WHERE run_id = ?", (d.name,))}
        for p in sorted((d / "calls").glob("*.json")):
            rec = _load(CallRecord, p)
            if rec and rec.seq not in have_calls:
                self._index_call(db, rec)
                added += 1
        have_cands = {r[0] for r in db.execute("SELECT id FROM candidates WHERE run_id = ?", (d.name,))}
        for p in sorted(d.iterdir()):
            if not (p.is_dir() and not p.name.startswith(".") and (p / "candidate.json").is_file()):
                continue
            try:
                c, attempt = _read_candidate(p)
            except (OSError, ValueError) as e:
                log.warning("skipping unreadable candidate %s: %s", p, e)
                continue
            if c.id not in have_cands:
                self._index_candidate(db, c, attempt, p.relative_to(self.candidates_dir).as_posix())
                added += 1
        return added


# ---------------------------------------------------------------- files of one candidate


class _Meta(Model):
    """candidate.json: what the other files do not hold."""

    id: str
    run_id: str
    iteration: int
    attempt: int = 1
    index: int
    stage: str
    created_at: datetime
    answer: dict[str, Any] | None = Field(default=None, description="Answer without text and raw (own files)")
    has_raw: bool = False
    has_code: bool = False


def _suffix(iteration: int, attempt: int, index: int) -> str:
    return f"i{iteration}{'' if attempt <= 1 else f'a{attempt}'}-c{index}"


def _candidate_files(c: Candidate, attempt: int) -> dict[str, str]:
    files = {"prompt.md": c.prompt, "result.json": c.result.model_dump_json(indent=2) + "\n"}
    if c.code is not None:
        files["code.py"] = c.code
    if c.answer is not None:
        files["response.md"] = c.answer.text
        if c.answer.raw is not None:
            files["response.json"] = c.answer.raw
    if c.profile is not None:
        files["profile.json"] = c.profile.model_dump_json(indent=2) + "\n"
    meta = _Meta(id=c.id, run_id=c.run_id, iteration=c.iteration, attempt=attempt, index=c.index, stage=c.stage,
                 created_at=c.created_at, has_code=c.code is not None,
                 has_raw=c.answer is not None and c.answer.raw is not None,
                 answer=c.answer.model_dump(mode="json", exclude={"text", "raw"}) if c.answer else None)
    # written last in the temp dir: a directory with candidate.json is a complete one even outside the rename
    files["candidate.json"] = meta.model_dump_json(indent=2) + "\n"
    return files


def _read_candidate(d: Path) -> tuple[Candidate, int]:
    meta = _Meta.model_validate_json((d / "candidate.json").read_text(encoding="utf-8"))
    text = lambda name: (d / name).read_text(encoding="utf-8")  # noqa: E731
    answer = None
    if meta.answer is not None:
        answer = Answer(text=text("response.md"), raw=text("response.json") if meta.has_raw else None, **meta.answer)
    profile = Profile.model_validate_json(text("profile.json")) if (d / "profile.json").is_file() else None
    c = Candidate(id=meta.id, run_id=meta.run_id, iteration=meta.iteration, index=meta.index, stage=meta.stage,
                  code=text("code.py") if meta.has_code else None, prompt=text("prompt.md"), answer=answer,
                  result=EvalResult.model_validate_json(text("result.json")), profile=profile,
                  created_at=meta.created_at)
    return c, meta.attempt


def _load(model: type[Model], path: Path) -> Any:
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        log.warning("skipping unreadable %s: %s", path, e)
        return None


def _alive(pid: int | None, host: str | None) -> bool:
    """Is the process that runs a run still there? Unknown (other host, no pid) counts as alive."""
    if not pid or (host and host != socket.gethostname()):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


class _Transaction:
    """`with store._tx() as db:` — BEGIN IMMEDIATE ... COMMIT, ROLLBACK on any exception (and under the lock)."""

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
