"""The text Triton compiles for a kernel: not the function the interpreter built, but its source as inspect reads it
from the file (from its first decorator to its end), dedented, from the first line that starts `def name(`. A
decorator's string that holds such a line (`@triton.jit(repr=lambda _: '''\\ndef k(...): ...''')`) is then the
kernel the GPU runs, text the static check never read as code; the interpreter, which calls the function itself,
runs the checked one."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

_TRITON_DEF = re.compile(r"^\s*def\s+\w+\s*\(")  # triton.runtime.jit's own search, before any dedent


def hidden_sources(lines: list[str], kernels: list[ast.FunctionDef]) -> Iterator[tuple[ast.FunctionDef, int]]:
    """(kernel, line) for each kernel whose decorators hold a line Triton would take for its `def`."""
    for k in kernels:
        first = min([d.lineno for d in k.decorator_list], default=k.lineno)
        hit = next((n for n in range(first, k.lineno) if n <= len(lines) and _TRITON_DEF.match(lines[n - 1])), None)
        if hit is not None:
            yield k, hit


class Sources:
    """The text Triton compiles, held to the text each kernel was made from. JITCallable.__init__ reads a kernel's
    source from the file (inspect) into `_src`, and the GPU's compiler parses `_src` at the first launch: an attribute
    a setattr by name (functools.update_wrapper copying a namespace into the kernel object) replaces after the static
    check read the file, with code no check read (a %globaltimer read spelled in pieces). Installed in a worker
    before the candidate is imported: every kernel is compiled from the text recorded when it was made (Triton's own,
    made earlier, from what they held at install), and one whose `_src` changed is reported (`swapped`). The
    interpreter calls the Python function itself, not this text."""

    def __init__(self) -> None:
        self.texts: dict[int, tuple[str, str]] = {}  # id -> (text, the kernel's name)
        self.kept: list[Any] = []  # the kernels recorded: their ids stay theirs
        self.swapped: list[str] = []

    def record(self, kernel: Any) -> None:
        if id(kernel) not in self.texts:
            self.kept.append(kernel)
            state = vars(kernel)
            self.texts[id(kernel)] = (str(state.get("_src", "")), str(state.get("_fn_name", "?")))

    def install(self) -> None:
        import sys

        from triton.runtime.jit import JITCallable

        for name, module in list(sys.modules.items()):  # Triton's own kernels (tl.cdiv's): reachable, public
            if name.split(".")[0] == "triton" and module is not None:
                for value in list(vars(module).values()):
                    if isinstance(value, JITCallable):
                        self.record(value)
        init, sources = JITCallable.__init__, self

        def new_init(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            sources.record(self)

        def parse(self: Any) -> Any:
            sources.record(self)  # made before install and not found above: what it holds now
            text, name = sources.texts[id(self)]
            if vars(self).get("_src") != text:
                why = (f"kernel `{name}`'s source (the text Triton compiles) was replaced after it was made from the "
                       "file: the code that runs must be the code that was checked")
                if why not in sources.swapped:
                    sources.swapped.append(why)
            tree = ast.parse(text)
            assert len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef)
            return tree

        JITCallable.__init__, JITCallable.parse = new_init, parse
