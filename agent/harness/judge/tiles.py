"""The widest tile an answer's code can use, read from its source, and a size that reaches past it.

A kernel that covers a reduction with one tile and no loop (`tl.arange(0, BLOCK)` with BLOCK capped at 8192, or
`min(triton.next_power_of_2(n), 8192)`) is right wherever the reduced extent fits the tile and wrong past it. The
problem's sizes are fixed; an answer's caps are not, so the answer itself says how wide a trial has to be: its
largest integer constant (literals and constant expressions, `2 ** 13`, `1 << 13`; rounded up to a power of two, as
a tile is) that a tile could be, at most Triton's largest tensor (2^20 elements). Wherever that exceeds the widest
extent the problem's sizes reach, the answer gets one more trial (agent.harness.pipeline): the widest size with one
dimension grown just past it (`past`). The constants counted are those written where a tile's width is
(largest_tile): not a problem size baked into an answer specialised to it.
"""

from __future__ import annotations

import ast
import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.harness.cache import DiskCache, entry_name
from agent.harness.job import Device, TrialSpec, trial_seed
from agent.harness.runner import sizes_for
from agent.schema import ProblemSpec, SizeOverrides, SizeSet

log = logging.getLogger(__name__)

MAX_TILE = 1 << 20  # TRITON_MAX_TENSOR_NUMEL: no tile is wider
LABEL = "past-tile"  # the extra size's label: f"{base}-{LABEL}-{tile}" (cpu-wide-past-tile-8192)
_FOLD: dict[type, Callable[[int, int], int]] = {
    ast.Mult: lambda a, b: a * b, ast.Pow: lambda a, b: a ** b if 0 <= b <= 40 else 0,
    ast.LShift: lambda a, b: a << b if 0 <= b <= 40 else 0, ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b, ast.FloorDiv: lambda a, b: a // b if b else 0,
}


def _value(node: ast.expr) -> int | None:
    """An integer constant expression's value (literals, + - * // ** <<), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLD:
        a, b = _value(node.left), _value(node.right)
        return _FOLD[type(node.op)](a, b) if a is not None and b is not None else None
    return None


def largest_tile(code: str) -> int:
    """The widest power-of-two tile `code`'s integer constants allow (0: none above 1, or the code does not parse).

    Only constants where a tile's width is written count: a tl.arange bound, a launch's or a triton.Config's
    keyword (BLOCK=8192), a min()/max() cap, a constexpr parameter's default, and a name or attribute assigned a
    constant that one of those reads (`BLOCK = 8192`, `self.block = 8192`). A problem's sizes baked into the code
    (Inductor's `xnumel = 262144`, a shape check) are no tile: an answer specialised to the problem's sizes (the
    Inductor start) would meet a size it was never meant for."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return 0
    places: list[ast.expr] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            fn = n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id if isinstance(n.func, ast.Name) else ""
            if fn in ("arange", "min", "max"):
                places += n.args
            if isinstance(n.func, ast.Subscript) or fn in ("Config", "run", "warmup"):
                places += [k.value for k in n.keywords if k.arg is not None]
            if fn == "Config":
                places += [v for a in n.args if isinstance(a, ast.Dict) for v in a.values if v is not None]
                places += [v for k in n.keywords if isinstance(k.value, ast.Dict) for v in k.value.values
                           if v is not None]
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = [*n.args.posonlyargs, *n.args.args]
            defaults = dict(zip(args[len(args) - len(n.args.defaults):], n.args.defaults))
            places += [d for a, d in defaults.items()
                       if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)]
            places += [d for a, d in zip(n.args.kwonlyargs, n.args.kw_defaults) if d is not None and
                       a.annotation is not None and "constexpr" in ast.unparse(a.annotation)]
    read = {x.id if isinstance(x, ast.Name) else x.attr for p in places for x in ast.walk(p)
            if isinstance(x, (ast.Name, ast.Attribute))}
    for n in ast.walk(tree):  # constants given to a name (or attribute) a tile's place reads
        if isinstance(n, ast.Assign):
            targets, value = n.targets, n.value
        elif isinstance(n, ast.AnnAssign) and n.value is not None:
            targets, value = [n.target], n.value
        else:
            continue
        names = {x.id if isinstance(x, ast.Name) else x.attr for t in targets for x in ast.walk(t)
                 if isinstance(x, (ast.Name, ast.Attribute))}
        if names & read:
            places.append(value)
    values = [v for p in places for n in ast.walk(p) if isinstance(n, (ast.Constant, ast.BinOp))
              for v in (_value(n),) if v is not None and 1 < v <= MAX_TILE]
    return 1 << (max(values) - 1).bit_length() if values else 0


def extent(shape: tuple[int, ...]) -> int:
    """What a kernel reduces one row or plane of: the elements past (batch, channels) of an N-d tensor (3-d and up),
    the last dimension of a 2-d one (a Linear's features), a vector's length."""
    if len(shape) >= 3:
        return math.prod(shape[2:])
    return shape[-1] if shape else 1


def widest_extent(path: Path, overrides: SizeOverrides, device: str = "meta") -> int:
    """The widest extent among the tensors the problem's Model makes at these sizes, run on `device`: the meta device
    (shapes only: no data, no memory; its first call costs seconds) or, at CPU mode's small sizes, the CPU; 0 where
    it does not run there."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_flatten

    from agent.problems import load_module

    widest = [0]

    class Shapes(TorchFunctionMode):  # not a dispatch mode: its first use costs seconds
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    widest[0] = max(widest[0], extent(tuple(t.shape)))
            return out

    try:
        module = load_module(path, overrides)
        with torch.device(device), torch.no_grad():
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
            widest[0] = max([0] + [extent(tuple(x.shape)) for x in inputs if isinstance(x, torch.Tensor)])
            with Shapes():
                model(*inputs)
    except Exception:  # a Model that needs data (a value read in forward): no extra size, as before
        return 0
    return widest[0]


class Widths:
    """The widest extents of a problem's sizes and the sizes past a tile, measured once per process (an evaluator's
    Shared keeps one) and, given `cache` (a directory beside the truths), once per problem file, size and torch:
    the meta device's first call took 3.7-4.2 s of an H200 run's first verdict, in the parent, before any worker."""

    def __init__(self, cache: DiskCache | None = None) -> None:
        self._seen: dict[str, int] = {}
        self._disk = cache

    def widest(self, path: Path, overrides: SizeOverrides, device: str = "meta") -> int:
        key = json.dumps([str(path), overrides], sort_keys=True)
        if key not in self._seen:
            self._seen[key] = self._measured(path, overrides, device)
        return self._seen[key]

    def _measured(self, path: Path, overrides: SizeOverrides, device: str) -> int:
        if self._disk is None:
            return widest_extent(path, overrides, device)
        import torch

        name = entry_name("widest", path.read_bytes(), json.dumps(overrides, sort_keys=True), device,
                          torch.__version__)
        hit = self._disk.get(name, ".json")
        if hit is not None:
            try:
                return int(json.loads(hit.read_text()))
            except (OSError, ValueError, TypeError):  # torn or foreign: measured again
                pass
        width = widest_extent(path, overrides, device)
        self._disk.put_text(name, ".json", json.dumps(width))
        return width

    def past(self, path: Path, sizes: list[SizeSet], tile: int, small: bool = False) -> SizeSet | None:
        """The smallest growth of the widest of `sizes` (one dimension global, batch at 1) whose widest extent
        exceeds `tile`; None where the sizes already reach past it or no global grows the extent. `small`: the
        sizes are CPU mode's, measured on the CPU (the meta device's first call is paid only where a size grows)."""
        from agent.problems import is_batch, is_dimension, load_module
        from agent.problems.source import SizeSource

        if tile < 2 or not sizes:
            return None
        base = max(sizes, key=lambda s: self.widest(path, s.overrides, "cpu" if small else "meta"))
        if self.widest(path, base.overrides) > tile:
            return None
        module = load_module(path, base.overrides)
        own = {k: v for k, v in vars(module).items()
               if k in SizeSource(path).sizes and type(v) is int and is_dimension(k, v)}
        start: SizeOverrides = {**base.overrides, **{k: 1 for k in own if is_batch(k)}}
        best: tuple[int, str] | None = None
        for k, v in own.items():  # the dimension whose doubling widens the extent most
            if is_batch(k):
                continue
            grown = self.widest(path, {**start, k: 2 * v})
            if grown > self.widest(path, start) and (best is None or grown > best[0]):
                best = (grown, k)
        if best is None:
            return None
        key, lo = best[1], own[best[1]]
        hi = 2 * lo
        while self.widest(path, {**start, key: hi}) <= tile:
            if hi > MAX_TILE:
                return None
            lo, hi = hi, 2 * hi
        while hi - lo > 1:  # the smallest value past the tile
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.widest(path, {**start, key: mid}) <= tile else (lo, mid)
        return SizeSet(label=f"{base.label}-{LABEL}-{tile}", overrides={**start, key: hi}, distributions=["randn"])


def past_tile(problem: ProblemSpec, device: Device, code: str, widths: Widths, inputs: int,
               first: int) -> tuple[ProblemSpec, list[TrialSpec]]:
    """`problem` with one more size and the trial at it (id `first`, seeded from the round's `inputs` seed), where no
    size of the device reaches past the answer's widest tile: a tile without a loop covering them all is wrong past."""
    sizes = sizes_for(problem, device)
    try:
        wide = widths.past(problem.path, sizes, largest_tile(code), small=device == "cpu")
    except Exception as e:  # the problem file at a size grown here: its reference says what is wrong, not this
        log.debug("no size past the tile of %s: %s", problem.name, e)
        wide = None
    if wide is None:
        return problem, []
    field = "sizes" if device == "cuda" else "cpu_sizes"
    trial = TrialSpec(id=first, size=len(sizes), distribution=(wide.distributions or ["randn"])[0],
                      seed=trial_seed(inputs, len(sizes), 0), buffer="fresh", trace=True)
    return problem.model_copy(update={field: [*sizes, wide]}), [trial]
