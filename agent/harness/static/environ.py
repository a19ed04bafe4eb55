"""The one use of `os` a kernel module has: reading Triton's own settings, as answers written for CPU mode do
(`INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"` picks block sizes for the interpreter). The module os is
otherwise a way to files, processes and secrets (an API key in the environment), so every use of a name bound to
it must be one of these reads of a literal TRITON_ name:

    os.environ.get("TRITON_X"[, default])   os.getenv("TRITON_X"[, default])
    os.environ["TRITON_X"]                  "TRITON_X" in os.environ   ("not in" too)

Anything else is refused: another variable, a computed name, os.environ passed around, copied, iterated or
written, and every other attribute of os. The variables are the process's own (the same for every call), so
reading them cannot tell the harness's checked calls from the others.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from agent.harness.static.names import dotted

OS = "os"
_IMPORTABLE = {"os.environ", "os.getenv"}  # `from os import environ, getenv`
_SETTING = re.compile(r"TRITON_\w+")
WHY = ("a kernel module may use os only to read Triton's settings, with a literal name: "
       "os.environ.get(\"TRITON_...\"), os.getenv(\"TRITON_...\"), os.environ[\"TRITON_...\"], "
       "\"TRITON_...\" in os.environ")


def importable(module: str, names: list[str] | None = None) -> bool:
    """`import os` (any alias), or `from os import environ/getenv`."""
    if names is None:
        return module == OS
    return module == OS and bool(names) and all(f"{OS}.{n}" in _IMPORTABLE for n in names)


def environment_uses(tree: ast.Module, aliases: dict[str, str]) -> Iterator[tuple[ast.AST, str]]:
    """(node, message) for each use of a name bound to os (or to os.environ, os.getenv) that is not a read of a
    Triton setting. Needs `_parent` links on the tree."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name):
            continue
        path = aliases.get(node.id)
        if path is None or path.split(".")[0] != OS:
            continue
        top: ast.AST = node
        while isinstance(getattr(top, "_parent", None), ast.Attribute):
            top = top._parent  # type: ignore[attr-defined]
        full = dotted(top, aliases)
        if not _reads_a_setting(top, full):
            yield node, f"`{full or node.id}` used here: {WHY}"


def _literal_setting(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(_SETTING.fullmatch(node.value))


def _reads_a_setting(top: ast.AST, path: str | None) -> bool:
    parent = getattr(top, "_parent", None)
    if path in ("os.environ.get", "os.getenv"):
        return isinstance(parent, ast.Call) and parent.func is top and 1 <= len(parent.args) <= 2 and \
            not parent.keywords and _literal_setting(parent.args[0]) and \
            all(isinstance(a, ast.Constant) for a in parent.args[1:])
    if path != "os.environ" or not isinstance(top, (ast.Name, ast.Attribute)) or \
            not isinstance(top.ctx, ast.Load):
        return False
    if isinstance(parent, ast.Subscript) and parent.value is top:
        return isinstance(parent.ctx, ast.Load) and _literal_setting(parent.slice)
    if isinstance(parent, ast.Compare) and len(parent.ops) == 1 and parent.comparators[0] is top:
        return isinstance(parent.ops[0], (ast.In, ast.NotIn)) and _literal_setting(parent.left)
    return False
