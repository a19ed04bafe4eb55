"""The text Triton compiles for a kernel: not the function the interpreter built, but its source as inspect reads it
from the file (from its first decorator to its end), dedented, from the first line that starts `def name(`. A
decorator's string that holds such a line (`@triton.jit(repr=lambda _: '''\\ndef k(...): ...''')`) is then the
kernel the GPU runs, text the static check never read as code; the interpreter, which calls the function itself,
runs the checked one."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

_TRITON_DEF = re.compile(r"^\s*def\s+\w+\s*\(")  # triton.runtime.jit's own search, before any dedent


def hidden_sources(lines: list[str], kernels: list[ast.FunctionDef]) -> Iterator[tuple[ast.FunctionDef, int]]:
    """(kernel, line) for each kernel whose decorators hold a line Triton would take for its `def`."""
    for k in kernels:
        first = min([d.lineno for d in k.decorator_list], default=k.lineno)
        hit = next((n for n in range(first, k.lineno) if n <= len(lines) and _TRITON_DEF.match(lines[n - 1])), None)
        if hit is not None:
            yield k, hit
