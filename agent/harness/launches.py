"""Which of a candidate's Triton kernels its forward actually launches (runs inside the worker)."""

from __future__ import annotations

from types import ModuleType
from typing import Any


class Launches:
    """Records which of the candidate's module-level Triton kernels forward launches. A decoy kernel beside a
    pure-PyTorch forward passes the static policy; it cannot pass this. Every launch path (fn[grid](...),
    autotuners, heuristics) goes through the kernel object's run(), wrapped here on the instance."""

    def __init__(self, module: ModuleType) -> None:
        from triton.runtime.jit import KernelInterface

        self.launched: set[str] = set()
        self.tracked: list[str] = []
        for value in list(vars(module).values()):
            obj = value
            while isinstance(obj, KernelInterface):  # autotune(heuristics(jit(f))): watch every layer
                name = getattr(obj, "__name__", None) or getattr(getattr(obj, "fn", None), "__name__", None)
                if name and "run" not in vars(obj):
                    self._watch(obj, name)
                obj = getattr(obj, "fn", None)

    def _watch(self, kernel: Any, name: str) -> None:
        original, launched = kernel.run, self.launched

        def run(*args: Any, **kwargs: Any) -> Any:
            launched.add(name)
            return original(*args, **kwargs)

        kernel.run = run
        if name not in self.tracked:
            self.tracked.append(name)
