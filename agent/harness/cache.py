"""What the harness keeps on disk across processes: the problem's truths and its eager/compile baselines.

A second `agent eval` of the same problem reuses both instead of recomputing them (tens of seconds on a GPU). An
entry's name hashes everything that changes it: the problem file, sizes, seed, trials and timing pool, the device and
GPU, torch / triton / CUDA / Python versions, the harness settings and the source of the code that computes it; so a
changed problem file or an upgraded torch is a miss, never a stale hit. The directory is bounded: past `max_mb`, the
least recently used entries go.

Candidates never see the cache (the pipeline masks it, as it masks the store): a cached truth would be an answer key.
For the same reason the seeds are salted with a random secret kept in the cache (`salted`): inputs stay the same on
this machine, so the cache hits, but nobody can compute them elsewhere and ship the outputs in an answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

# The code whose behaviour a cached truth or baseline depends on: a change to it is a new key.
_CODE = ("worker/inputs.py", "worker/main.py", "worker/workerio.py", "worker/timing.py", "worker/trace.py", "worker/trusted.py", "worker/errors.py", "job.py")


def fingerprint(device: str, gpu: str) -> str:
    """Everything outside the problem that changes a truth or a timing."""
    import torch

    from agent.harness.settings import settings

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:  # pragma: no cover - triton is a dependency
        triton_version = "none"
    here = Path(__file__).parent
    code = hashlib.sha256(b"".join((here / name).read_bytes() for name in _CODE)).hexdigest()[:16]
    return json.dumps({
        "device": device, "gpu": gpu if device == "cuda" else "cpu", "torch": torch.__version__,
        "triton": triton_version, "cuda": torch.version.cuda, "python": platform.python_version(), "code": code,
        # what changes a truth or a timing; not where or how many candidates run (sandbox), nor the cache's own bound
        "settings": settings().model_dump(mode="json", include={"validation", "timing"}),
    }, sort_keys=True)


def entry_name(prefix: str, *parts: object) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\x00")
    return f"{prefix}-{h.hexdigest()[:24]}"


class DiskCache:
    """A bounded directory of entries (one file each), written atomically, evicted least recently used first."""

    def __init__(self, root: Path, max_mb: float) -> None:
        self.root, self.max_bytes = Path(root), int(max_mb * (1 << 20))

    def path(self, name: str, suffix: str) -> Path:
        return self.root / f"{name}{suffix}"

    def get(self, name: str, suffix: str) -> Path | None:
        p = self.path(name, suffix)
        if not p.is_file():
            return None
        try:
            os.utime(p)  # recently used
        except OSError:
            pass
        return p

    def put(self, name: str, suffix: str, write: Callable[[Path], None]) -> None:
        """write(tmp) fills a temporary file that then replaces the entry; a read-only cache only logs."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=self.root)
            os.close(fd)
            try:
                write(Path(tmp))
                os.replace(tmp, self.path(name, suffix))
            finally:
                Path(tmp).unlink(missing_ok=True)
            self._evict()
        except OSError as e:  # results are still right, only not remembered
            log.debug("cannot cache %s: %s", name, e)

    def put_text(self, name: str, suffix: str, text: str) -> None:
        """put, for an entry that is a text."""

        def write(tmp: Path) -> None:
            tmp.write_text(text)

        self.put(name, suffix, write)

    def _evict(self) -> None:
        entries = []
        for p in self.root.iterdir():
            try:
                st = p.stat()
            except OSError:
                continue
            if p.is_file() and not p.name.startswith("."):
                entries.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in entries)
        for _, size, p in sorted(entries):
            if total <= self.max_bytes:
                break
            p.unlink(missing_ok=True)
            total -= size


def salted(seed: int, cache_dir: Path | None, purpose: str = "") -> int:
    """`seed` mixed with this machine's secret (kept in the cache; a fresh one per process without a cache) and a
    `purpose`: seeds for different purposes are independent, so knowing one (the weights' seed, which the candidate's
    __init__ runs under) tells nothing of another (the trials' inputs)."""
    secret = _secret(cache_dir)
    data = secret + purpose.encode() + seed.to_bytes(8, "little", signed=True)
    return int.from_bytes(hashlib.sha256(data).digest()[:4], "little") >> 1


def _secret(cache_dir: Path | None) -> bytes:
    if cache_dir is None:
        return _PROCESS_SECRET
    path = Path(cache_dir) / "secret"
    try:
        data = path.read_bytes()
        if len(data) >= 16:
            return data
    except OSError:
        pass
    fresh = secrets.token_bytes(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(fresh)
        return fresh
    except FileExistsError:  # another process wrote it first: use theirs
        return path.read_bytes()
    except OSError:  # a read-only cache: this process's own secret
        return _PROCESS_SECRET


# One secret per process where no cache can hold one: never written, never shared.
_PROCESS_SECRET = secrets.token_bytes(32)
