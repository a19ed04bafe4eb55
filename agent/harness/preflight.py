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
    import agent.harness.worker.main, agent.harness.worker.candidate, agent.harness.worker.trusted, agent.harness.worker.trace
    import agent.harness.judge.validate, agent.harness.worker.inputs, torch, triton, triton.language{extra}
except ImportError as e:
    print(json.dumps({{"module": e.name or str(e), "error": str(e), "path": sys.path}}))
    sys.exit(3)
"""
# CPU mode: a loop over a runtime bound, a masked load and a store, in Triton's interpreter. Triton 3.6's
# interpreter fails on it under NumPy 2.4 (int() of a one-element array): then no answer can be judged here.
_INTERPRETED = """
import json, sys
import numpy, torch, triton
import triton.language as tl


@triton.jit
def _total(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


x, out = torch.ones(10), torch.zeros(1)
try:
    _total[(1,)](x, out, 10, BLOCK=4)
    assert out.item() == 10.0, out.item()
except Exception as e:
    print(json.dumps({"interpreter": f"{type(e).__name__}: {e}"[:300], "triton": triton.__version__,
                      "numpy": numpy.__version__}))
    sys.exit(4)
"""
_SUSPECT = re.compile(r"ModuleNotFoundError|ImportError|No module named|cannot import name|InterpreterError|"
                      r"only 0-dimensional arrays")


def suspect(text: str) -> bool:
    """Whether a worker's stderr or result speaks of a failure that may be the harness's own (an import, Triton's
    interpreter itself): worth asking `verify`."""
    return bool(_SUSPECT.search(text))


def verify(device: Device, hide: tuple[Path, ...] = ()) -> None:
    """Raise HarnessError if a worker behind the wall cannot import the harness's own modules (CPU mode: or Triton's
    interpreter cannot run a plain kernel); else return (and remember it for this process)."""
    _verified(device, tuple(sorted(hide)))


@lru_cache(maxsize=4)
def _verified(device: Device, hide: tuple[Path, ...]) -> bool:
    import sys

    from agent.harness.job import worker_env
    from agent.harness.wall.sandbox import run_sandboxed

    code = _PROBE.format(extra=", numpy, triton.runtime.interpreter" if device == "cpu" else "")
    if device == "cpu":
        code += _INTERPRETED
    workdir = Path(tempfile.mkdtemp(prefix="agent-preflight-"))
    try:
        (workdir / "probe.py").write_text(code)  # a file: Triton reads a kernel's source
        sb = run_sandboxed([sys.executable, str(workdir / "probe.py")], workdir=workdir, timeout_s=120,
                           env=worker_env(device), hide=list(hide))
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
    if "interpreter" in found:
        raise HarnessError(
            f"Triton {found['triton']}'s interpreter cannot run a kernel here under NumPy {found['numpy']} "
            f"({found['interpreter']}): CPU mode can judge no answer",
            "install a NumPy that this Triton's interpreter supports (Triton 3.6 with NumPy 2.2 works), or a newer "
            "Triton; or judge on a GPU")
    looked = ", ".join(p for p in found["path"] if p) or "nowhere"
    raise HarnessError(
        f"the sandboxed worker cannot import {found['module']}, which the harness needs ({found['error']}); "
        f"it looked in: {looked}",
        "install the agent's dependencies where this interpreter imports from, and run the agent with that same "
        "interpreter and environment")
