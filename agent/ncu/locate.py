"""Where the ncu executable is: the profiler runs it, and the report reader falls back to it (agent.ncu.rawcsv)."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

NCU_DIRS = ("/usr/local/cuda/bin", "/opt/nvidia/nsight-compute/*")


def find_ncu() -> Path | None:
    """The ncu executable: on PATH, else in /usr/local/cuda/bin, else the newest /opt/nvidia/nsight-compute/*/."""
    found = shutil.which("ncu")
    if found:
        return Path(found)
    for pattern in NCU_DIRS:
        for d in sorted(glob.glob(pattern), reverse=True):
            candidate = Path(d) / "ncu"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    return None
