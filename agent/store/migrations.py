"""Numbered schema migrations for the index: agent/data/migrations/NNN_name.sql, each applied once, all-or-nothing."""

from __future__ import annotations

import logging
import re
import sqlite3
from datetime import datetime, timezone
from importlib import resources
from typing import Iterator

log = logging.getLogger(__name__)


def packaged_migrations() -> list[tuple[int, str, str]]:
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
    for version, name, sql in migrations if migrations is not None else packaged_migrations():
        if conn.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (version,)).fetchone():
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (version,)).fetchone():
                conn.execute("ROLLBACK")  # another process got there first
                continue
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                         (version, name, datetime.now(timezone.utc).isoformat()))
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
