"""The files under candidates/ (the truth the index is built from): where each lives, how it is written, and
what a killed writer leaves behind.

    candidates/index.sqlite                           the index (agent/store/index.py), rebuilt from the rest
    candidates/<run_id>/run.json                      RunRecord's stored part (config, status, best, ...)
    candidates/<run_id>/iterations/i0003-a1.json      each attempt at an iteration: prompt, why this stage
    candidates/<run_id>/calls/000001.json             every LLM HTTP exchange, request and raw response
    candidates/<run_id>/i3-c1/                        one candidate: code.py prompt.md response.md response.json
                                                      result.json profile.json candidate.json
    profiles/<run_id>/<candidate_id>.ncu-rep          ncu reports (Store.profile_path)

Every file is written to a hidden `.tmp-` name, fsynced and renamed into place; a candidate's whole folder is
renamed in one step, so a kill leaves either no candidate or a complete one.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import socket
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from pydantic import Field

from agent.schema import Answer, Candidate, EvalResult, Model, Profile
from agent.store.records import IterationRecord, RunRecord

log = logging.getLogger(__name__)

TMP_PREFIX = ".tmp-"


# ---------------------------------------------------------------- atomic writes


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
    """Write and fsync one file (no rename: callers rename the file or its directory). Every text the store writes
    passes here, and leaves without the values of this process's secrets (agent.redact)."""
    from agent.redact import scrub

    with open(path, "w", encoding="utf-8") as f:
        f.write(scrub(text))
        f.flush()
        os.fsync(f.fileno())


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step: temp file in the same directory, fsync, os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}-{secrets.token_hex(4)}")
    try:
        _write_file(tmp, text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def load(model: type[Model], path: Path) -> Any:
    """`model` read from `path`, or None (logged) when the file is missing or unreadable."""
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        log.warning("skipping unreadable %s: %s", path, e)
        return None


# ---------------------------------------------------------------- runs, iterations, calls


def run_dirs(candidates_dir: Path) -> Iterator[Path]:
    """The run directories (those with a run.json), in id order."""
    if not candidates_dir.is_dir():
        return iter(())
    return (p for p in sorted(candidates_dir.iterdir()) if p.is_dir() and (p / "run.json").is_file())


def run_json(candidates_dir: Path, run_id: str) -> Path:
    return candidates_dir / run_id / "run.json"


def write_run(candidates_dir: Path, record: RunRecord) -> None:
    """run.json: the record without the totals the index derives."""
    stored = record.model_dump(mode="json", exclude={"usage", "iterations", "candidates"})
    write_atomic(run_json(candidates_dir, record.id), json.dumps(stored, indent=2) + "\n")


def iteration_path(candidates_dir: Path, run_id: str, iteration: int, attempt: int) -> Path:
    return candidates_dir / run_id / "iterations" / f"i{iteration:04d}-a{attempt}.json"


def write_iteration(candidates_dir: Path, rec: IterationRecord) -> None:
    write_atomic(iteration_path(candidates_dir, rec.run_id, rec.iteration, rec.attempt),
                 rec.model_dump_json(indent=2) + "\n")


def calls_dir(candidates_dir: Path, run_id: str) -> Path:
    return candidates_dir / run_id / "calls"


# ---------------------------------------------------------------- one candidate's folder


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
    parent: str | None = None
    idea: str = ""
    finding: str | None = None


def candidate_suffix(iteration: int, attempt: int, index: int) -> str:
    """The folder name (and candidate id tail): `i3-c1`, or `i3a2-c1` for a resumed iteration's second attempt."""
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
                 created_at=c.created_at, has_code=c.code is not None, parent=c.parent, idea=c.idea,
                 finding=c.finding,
                 has_raw=c.answer is not None and c.answer.raw is not None,
                 answer=c.answer.model_dump(mode="json", exclude={"text", "raw"}) if c.answer else None)
    # written last in the temp dir: a directory with candidate.json is a complete one even outside the rename
    files["candidate.json"] = meta.model_dump_json(indent=2) + "\n"
    return files


def write_candidate(run_dir: Path, name: str, c: Candidate, attempt: int) -> Path:
    """Write `run_dir/name/` all or nothing (temp dir, every file fsynced, one rename); returns the folder."""
    final = run_dir / name
    tmp = run_dir / f"{TMP_PREFIX}{name}-{secrets.token_hex(4)}"
    tmp.mkdir(parents=True)
    try:
        for fname, text in _candidate_files(c, attempt).items():
            _write_file(tmp / fname, text)
        _fsync_dir(tmp)
        if final.exists():  # re-recording an id replaces it (never expected from the loop)
            old = run_dir / f"{TMP_PREFIX}old-{name}-{secrets.token_hex(4)}"
            os.replace(final, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    _fsync_dir(run_dir)
    return final


def read_candidate(d: Path) -> tuple[Candidate, int]:
    """The candidate stored in folder `d`, and the attempt of the iteration it belongs to."""
    meta = _Meta.model_validate_json((d / "candidate.json").read_text(encoding="utf-8"))
    text = lambda name: (d / name).read_text(encoding="utf-8")  # noqa: E731
    answer = None
    if meta.answer is not None:
        answer = Answer(text=text("response.md"), raw=text("response.json") if meta.has_raw else None, **meta.answer)
    profile = Profile.model_validate_json(text("profile.json")) if (d / "profile.json").is_file() else None
    c = Candidate(id=meta.id, run_id=meta.run_id, iteration=meta.iteration, index=meta.index, stage=meta.stage,
                  code=text("code.py") if meta.has_code else None, prompt=text("prompt.md"), answer=answer,
                  result=EvalResult.model_validate_json(text("result.json")), profile=profile,
                  parent=meta.parent, idea=meta.idea, finding=meta.finding, created_at=meta.created_at)
    return c, meta.attempt


# ---------------------------------------------------------------- what a killed writer leaves


def sweep(d: Path) -> None:
    """Remove the temp files a killed writer left in a run directory, once its process is gone."""
    run = load(RunRecord, d / "run.json")
    if run is None or (run.status == "running" and alive(run.pid, run.host)):
        return  # someone may be writing there right now
    for p in d.glob(f"{TMP_PREFIX}*"):
        log.info("removing %s, left by an interrupted write", p)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def alive(pid: int | None, host: str | None) -> bool:
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
