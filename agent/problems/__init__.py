"""Problems: KernelBench-style modules (Model, get_inputs, get_init_inputs, size globals) plus metadata.

A problem can be instantiated at other sizes by rebinding its size globals: `load_module(path, {"height": 13})`
executes the file as a fresh module with those globals bound to the new values where the file binds them, so every
global computed from them at import time (`bias_shape = (out_channels, 1, 1)`) and get_inputs()/get_init_inputs()
see them (agent.problems.source says what a size global is).

A foreign file (`--problem PATH`, or the name of a file in agent/data/kernelbench/) has no size sets in
agent/data/problems.toml, so derive_sizes() makes them from its integer size globals, by name: globals that look like
a tensor dimension (batch, channels, height, width, depth, features, dim, length, hidden, ...) are resized; layer
hyper-parameters (kernel_size, stride, padding, dilation, groups, heads, pool/window sizes, ...) are kept, since
changing them changes the model, not just its input; so is an axis (`sum_dim = 1`: a name ending in dim, under 8).
Sizes:
  GPU  "full" = the file's own sizes; "odd" = every resized global that is even and > 2 minus one (tails, masks)
  CPU  "cpu" = batch-like -> min(v, 2); others -> min(v, max(8, min(32, v // 8))) (128 -> 16, 512 -> 32, 3 -> 3),
       small enough for TRITON_INTERPRET=1; "cpu-wide" = one image, channel-like -> min(v, 65), spatial ones so that
       the reduced plane exceeds 4096 elements (66x66, 18^3, ...), one input distribution: loops and masks a tiny
       size never reaches;
       "cpu-odd" = the "cpu" sizes, batch 3 and even values > 2 minus one
A channel-like size that a group or head count the file uses divides (GroupNorm(num_groups, out_channels)) stays a
multiple of it: the largest multiple not above the value the rules above give, and in the odd sets one with an odd
quotient (24 channels in 8 groups: 24, never 23; 16 in 8: 8). Globals computed from sizes follow them; a derived
size set at which the reference still cannot run (a pool window larger than the derived plane) is skipped with a
notice on the device a command runs on (agent.problems.runnable). A file with no size globals is validated at its own
sizes only (a warning says so).
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from types import ModuleType
from typing import Literal

from agent.datafiles import data_file, load_toml
from agent.errors import UserError, unknown
from agent.problems.source import SizeSource, load_module
from agent.schema import Number, ProblemSpec, SizeOverrides, SizeSet

_HERE = Path(__file__).parent
log = logging.getLogger(__name__)

# derive_sizes(): which integer globals of a foreign problem file are tensor dimensions (resized) and which are
# layer hyper-parameters (kept). Checked in this order: a name matching _KEEP is never resized.
_KEEP = re.compile(r"kernel|stride|pad|dilation|group|head|pool|window|scale|factor|eps|seed|dtype|top_?k", re.I)
_DIM = re.compile(r"batch|channel|height|width|depth|feature|dim|size|len|seq|hidden|num_|^[nchwdlbkm]$", re.I)
_BATCH = re.compile(r"batch|^n$|^b$", re.I)
_SPATIAL = re.compile(r"height|width|depth|len|seq|^[hwdl]$", re.I)
_WIDE = re.compile(r"channel|feature|hidden|dim|^c$", re.I)
_AXIS = re.compile(r"axis|(^|_)dim$", re.I)  # with a value under 8, an axis (sum_dim = 1, dim = 1): kept
_DIVISOR = re.compile(r"group|head", re.I)  # kept counts that must divide a channel-like size (GroupNorm, heads)
_LOOKALIKES = "kernelbench"  # agent/data/kernelbench/: KernelBench look-alikes, named by their file's stem


def _registry() -> dict[str, dict]:
    return load_toml("problems.toml")


def list_problems() -> list[ProblemSpec]:
    """The built-in problems, in registry order."""
    return [_builtin(name, meta) for name, meta in _registry().items()]


def _builtin(name: str, meta: dict) -> ProblemSpec:
    return ProblemSpec(
        name=name,
        path=_HERE / meta["file"],
        description=meta.get("description", ""),
        start=_HERE / meta["start"] if meta.get("start") else None,
        sizes=meta["sizes"],
        cpu_sizes=meta["cpu_sizes"],
    )


def lookalikes() -> list[Path]:
    """The KernelBench look-alike files shipped in agent/data/kernelbench/ (by name: `--problem kb_42_...`)."""
    return sorted(data_file(_LOOKALIKES).glob("kb_*.py"))


def load_problem(name_or_path: str, device: Literal["cuda", "cpu"] | None = None) -> ProblemSpec:
    """A built-in problem by name, a shipped KernelBench look-alike by name, or any KernelBench-style file by path.

    With `device` (the commands that run the reference: eval, run), a foreign file's derived size sets for that
    device are kept only where its reference runs (agent.problems.runnable: the others are skipped with a notice)."""
    registry = _registry()
    if name_or_path in registry:
        return _builtin(name_or_path, registry[name_or_path])
    shipped = {p.stem: p for p in lookalikes()}
    if name_or_path in shipped:
        return _from_file(shipped[name_or_path], device)
    path = Path(name_or_path)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise UserError(f"problem file not found: {path}")
        return _from_file(path, device)
    raise unknown("problem", name_or_path, list(registry) + list(shipped) + ["PATH.py"])


def _from_file(path: Path, device: Literal["cuda", "cpu"] | None) -> ProblemSpec:
    module = load_module(path)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise UserError(f"{path} is not a KernelBench-style problem: it has no {attr}")
    problem = ProblemSpec(
        name=path.stem,
        path=path.resolve(),
        description=(module.Model.__doc__ or "").strip().splitlines()[0] if module.Model.__doc__ else "",
        start=None,
        **derive_sizes(module),
    )
    if device is None:
        return problem
    from agent.problems.runnable import runnable

    return runnable(problem, device)


def _odd(v: int) -> int:
    return v - 1 if v > 2 and v % 2 == 0 else v


def is_dimension(name: str, value: int) -> bool:
    """Whether a problem's integer size global is a tensor dimension (resized), not a layer's hyper-parameter or an
    axis (kept): by its name, as the module doc says."""
    return (not name.startswith("_") and bool(_DIM.search(name)) and not _KEEP.search(name) and value > 0
            and not (_AXIS.search(name) and value < 8))


def is_batch(name: str) -> bool:
    return bool(_BATCH.search(name))


def derive_sizes(module: ModuleType) -> dict[str, list[SizeSet]]:
    """GPU and CPU size sets for a foreign problem module, from its integer size globals (see the module doc)."""
    source = SizeSource(Path(module.__file__ or ""))
    own = {k: v for k, v in vars(module).items() if k in source.sizes and type(v) is int}
    dims = {k: v for k, v in own.items() if is_dimension(k, v)}
    if not dims:
        log.warning("%s has no size globals to resize: it is validated at its own sizes only", module.__name__)
        return {"sizes": [SizeSet(label="full")], "cpu_sizes": [SizeSet(label="cpu")]}
    counts = [v for k, v in own.items() if _DIVISOR.search(k) and v > 1 and k in source.used]  # one the file uses
    step = {k: math.lcm(*(c for c in counts if v % c == 0)) for k, v in dims.items() if _WIDE.search(k)}

    def fit(k: str, v: Number, odd: bool = False) -> int:
        """v, or for a size a group count divides, the multiple of the count below it (odd quotient if odd)."""
        s, v = step.get(k, 1), int(v)  # every resized global is an int
        if s == 1:
            return _odd(v) if odd else v
        q = max(1, v // s)
        return (q - 1 if odd and q % 2 == 0 else q) * s

    cpu: SizeOverrides = {k: min(v, 2) if _BATCH.search(k) else fit(k, min(v, max(8, min(32, v // 8))))
                          for k, v in dims.items()}
    cpu_odd: SizeOverrides = {k: min(dims[k], 3) if _BATCH.search(k) else fit(k, v, odd=True) for k, v in cpu.items()}
    odd: SizeOverrides = {k: fit(k, v, odd=True) for k, v in dims.items()}
    spatial = [k for k in dims if _SPATIAL.search(k) and not _BATCH.search(k)]
    side = {1: 4200, 2: 66, 3: 18}.get(len(spatial), 8)  # a reduced plane over 4096 elements, whatever its rank
    # channel-like: over 64 where the file has more; a group count's multiple at or above 65 (v is one too)
    wide: SizeOverrides = {k: 1 if _BATCH.search(k) else min(v, side) if k in spatial
                           else min(v, -(-65 // step.get(k, 1)) * step.get(k, 1)) if _WIDE.search(k) else cpu[k]
                           for k, v in dims.items()}
    cpu_sizes = [SizeSet(label="cpu", overrides=cpu)]
    if wide != cpu:
        cpu_sizes.append(SizeSet(label="cpu-wide", overrides=wide, distributions=["randn"]))
    return {
        "sizes": [SizeSet(label="full"), SizeSet(label="odd", overrides=odd)],
        "cpu_sizes": [*cpu_sizes, SizeSet(label="cpu-odd", overrides=cpu_odd)],
    }


def starting_code(problem: ProblemSpec) -> str | None:
    """The problem's starting kernel source, if it has one."""
    return problem.start.read_text() if problem.start else None
