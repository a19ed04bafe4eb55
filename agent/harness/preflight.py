"""Whether a sandboxed worker can import what the harness itself needs: told apart from an answer or a problem file
that imports something missing.

A worker that died of an import error may be the harness's fault (the project installed where the wall hides it,
a dependency missing) or the code's it ran (an answer importing `apex`, a problem file importing `einops`). The
worker's own word cannot decide: a candidate can print any traceback and exit. So the parent asks again, in a
sandbox of its own with the same environment and the same wall, running no code but ours: if our imports fail there
the harness cannot evaluate at all (HarnessError, naming the module and where the worker looked); if they work, the
failure was the code's. Asked only after a failure that mentions an import, and once per process and device.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from agent.errors import HarnessError
from agent.harness.job import Device

# What every worker mode imports before it runs anyone's code (the trusted modules), and what CPU mode's
# interpreter needs. Printed as one JSON line on failure: the module and the worker's sys.path.
_PROBE = """\
import json, sys
try:
    import agent.harness.worker, agent.harness.candidate, agent.harness.trusted, agent.harness.trace
    import agent.harness.validate, agent.harness.inputs, torch, triton, triton.language{extra}
except ImportError as e:
    print(json.dumps({{"module": e.name or str(e), "error": str(e), "path": sys.path}}))
    sys.exit(3)
"""
_IMPORT_FAILURE = re.compile(r"ModuleNotFoundError|ImportError|No module named|cannot import name")


def mentions_import_failure(text: str) -> bool:
    """Whether a worker's stderr or result speaks of an import that failed (worth asking `verify`)."""
    return bool(_IMPORT_FAILURE.search(text))


def verify(device: Device, hide: tuple[Path, ...] = ()) -> None:
    """Raise HarnessError if a worker behind the wall cannot import the harness's own modules; else return (and
    remember it for this process)."""
    _verified(device, tuple(sorted(hide)))


@lru_cache(maxsize=4)
def _verified(device: Device, hide: tuple[Path, ...]) -> bool:
    import sys

    from agent.harness.job import worker_env
    from agent.harness.sandbox import run_sandboxed

    code = _PROBE.format(extra=", numpy, triton.runtime.interpreter" if device == "cpu" else "")
    workdir = Path(tempfile.mkdtemp(prefix="agent-preflight-"))
    try:
        sb = run_sandboxed([sys.executable, "-c", code], workdir=workdir, timeout_s=120, env=worker_env(device),
                           hide=list(hide))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if sb.ok:
        return True
    found = None
    for line in reversed(sb.stdout.strip().splitlines()):
        try:
            found = json.loads(line)
            break
        except ValueError:
            continue
    if found is None:  # not an import error: the interpreter itself would not start behind the wall
        lines = [ln for ln in sb.stderr.strip().splitlines() if ln.strip()]
        raise HarnessError(f"the sandboxed worker cannot start: {lines[-1] if lines else f'exit {sb.returncode}'}",
                           "the harness's own interpreter fails behind the sandbox's wall")
    looked = ", ".join(p for p in found["path"] if p) or "nowhere"
    raise HarnessError(
        f"the sandboxed worker cannot import {found['module']}, which the harness needs ({found['error']}); "
        f"it looked in: {looked}",
        "install the agent's dependencies where this interpreter imports from, and run the agent with that same "
        "interpreter and environment")
