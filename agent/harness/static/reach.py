"""What a candidate can reach from the modules it may import, read off the real modules.

A blocklist of top-level import names fails on the first path nobody listed: `torch.os`, `triton.runtime.jit.sys`
and `torch.nn.modules.module.inspect` are all modules reachable as attributes of allowed ones. So dotted paths are
resolved against the imported modules themselves: every module met on the way must be allowed. Where a path
cannot be resolved statically (an attribute of a local variable), the names of all modules reachable from allowed
ones, but not allowed themselves, are refused as attribute names.

Importing torch and triton here costs ~2 s once per process; the parent imports torch anyway.
"""

from __future__ import annotations

import importlib
import types
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

_MISSING = object()


@dataclass(frozen=True)
class Resolution:
    """Where a dotted path leads: `module` (an allowed module, or the first refused one in `refused`), an `object`
    (past the last module: attributes of a class or function), or `unknown` (not an attribute here)."""

    kind: Literal["module", "object", "unknown"]
    refused: str | None = None  # the first module on the path that is not allowed, as its real name
    via: str | None = None  # the dotted prefix that reached it


class Reach:
    """The allowlist of modules, applied to what the real modules expose."""

    def __init__(self, allowed: list[str], always_denied: list[str]) -> None:
        self.exact = {m for m in allowed if not m.endswith(".*")}
        self.packages = tuple(m[:-2] for m in allowed if m.endswith(".*"))
        self.always_denied = frozenset(always_denied)

    def allowed(self, module: str) -> bool:
        return module in self.exact or any(module == p or module.startswith(p + ".") for p in self.packages)

    def _import(self, name: str) -> Any:
        """An allowed module, imported (never anything else: importing runs code)."""
        if not self.allowed(name):
            return _MISSING
        try:
            return importlib.import_module(name)
        except Exception:  # a module this machine lacks (e.g. triton without a GPU backend)
            return _MISSING

    def resolve(self, dotted: str) -> Resolution:
        """Follow `dotted` (rooted at an importable module) through the real objects."""
        parts = dotted.split(".")
        obj = self._import(parts[0])
        if obj is _MISSING:
            return Resolution("unknown")
        for i, name in enumerate(parts[1:], start=1):
            if not isinstance(obj, types.ModuleType):
                return Resolution("object")
            nxt = getattr(obj, name, _MISSING)
            if nxt is _MISSING:
                nxt = self._import(".".join(parts[: i + 1]))
            if nxt is _MISSING:
                return Resolution("unknown")
            if isinstance(nxt, types.ModuleType) and not self.allowed(nxt.__name__):
                return Resolution("module", refused=nxt.__name__, via=".".join(parts[: i + 1]))
            obj = nxt
        return Resolution("module" if isinstance(obj, types.ModuleType) else "object")

    @cached_property
    def denied_names(self) -> frozenset[str]:
        """Attribute names that lead from an allowed module to one that is not, minus the names tensors and
        modules use for their own attributes (`x.grad`, `self.modules()`): those are refused where resolvable."""
        found = set(self.always_denied)
        for name in sorted(self.exact):
            module = self._import(name)
            if module is _MISSING:
                continue
            for attr, value in list(vars(module).items()):
                if isinstance(value, types.ModuleType) and not self.allowed(value.__name__):
                    found.add(attr)
        return frozenset(found - (self._object_attributes - self.always_denied))

    @cached_property
    def _object_attributes(self) -> set[str]:
        import torch

        names = set(dir(torch.Tensor)) | set(dir(torch.nn.Linear(1, 1)))
        for t in (list, dict, str, tuple, set, int, float):
            names |= set(dir(t))
        return names
