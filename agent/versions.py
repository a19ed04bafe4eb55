"""What a run was measured with: the agent's, Python's, PyTorch's, Triton's and CUDA's versions (a report's
"versions"). Read from the installed packages' metadata; CUDA's from torch only where torch is already imported
(`agent --help` and the store import no torch)."""

from __future__ import annotations

import platform
import sys
from importlib import metadata


def versions() -> dict[str, str]:
    """{"agent": "0.1.0", "python": "3.11.7", "torch": "2.13.0+cpu", "triton": "3.5.0", "cuda": "12.8", ...}."""
    out = {"python": platform.python_version()}
    for dist in ("agent", "torch", "triton", "nvidia-ml-py", "ncu-report"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = str(torch.__version__)
        cuda = getattr(getattr(torch, "version", None), "cuda", None)
        if cuda:
            out["cuda"] = str(cuda)
    return out
