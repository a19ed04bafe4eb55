"""Problems: KernelBench-style modules (Model, get_inputs, get_init_inputs, size globals) plus metadata.

A problem can be instantiated at other sizes by rebinding its size globals: `load_module(path, {"height": 13})`
executes the file as a fresh module and overrides those globals, so get_inputs()/get_init_inputs() see them.
"""

from __future__ import annotations

import importlib.util
import itertools
import tomllib
from pathlib import Path
from types import ModuleType

from agent.errors import UserError, unknown
from agent.schema import ProblemSpec, SizeOverrides

_HERE = Path(__file__).parent
_counter = itertools.count()


def _registry() -> dict[str, dict]:
    with open(_HERE / "problems.toml", "rb") as f:
        return tomllib.load(f)


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


def load_problem(name_or_path: str) -> ProblemSpec:
    """A built-in problem by name, or any KernelBench-style file by path."""
    registry = _registry()
    if name_or_path in registry:
        return _builtin(name_or_path, registry[name_or_path])
    path = Path(name_or_path)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise UserError(f"problem file not found: {path}")
        return _from_file(path)
    raise unknown("problem", name_or_path, list(registry) + ["PATH.py"])


def _from_file(path: Path) -> ProblemSpec:
    module = load_module(path)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise UserError(f"{path} is not a KernelBench-style problem: it has no {attr}")
    return ProblemSpec(
        name=path.stem,
        path=path.resolve(),
        description=(module.Model.__doc__ or "").strip().splitlines()[0] if module.Model.__doc__ else "",
        start=None,
        sizes=[{"label": "full"}],
        cpu_sizes=[{"label": "cpu"}],
    )


def load_module(path: Path, overrides: SizeOverrides | None = None) -> ModuleType:
    """Execute `path` as a fresh module (never cached in sys.modules) with size globals rebound."""
    name = f"_agent_problem_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot load problem file {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # a user's file: report, don't crash
        raise UserError(f"problem file {path} failed to load: {type(e).__name__}: {e}") from e
    for key, value in (overrides or {}).items():
        if not hasattr(module, key):
            raise UserError(f"problem {path.stem} has no size global {key!r}")
        setattr(module, key, value)
    return module


def starting_code(problem: ProblemSpec) -> str | None:
    """The problem's starting kernel source, if it has one."""
    return problem.start.read_text() if problem.start else None
