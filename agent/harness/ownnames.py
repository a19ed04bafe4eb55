"""A getattr whose name is computed, yet can only reach what the answer itself named: `getattr(self.lstm,
f"weight_ih_l{layer}")`, nn.RNN's documented per-layer parameters, written so by real answers (35 of LLMKernel's
answers; refused before as an escape).

A computed name is refused because it can be anything: `__globals__`, `_C`, `load`. Here it cannot: the object is
the answer's own module (self, or an attribute chain from self), and the name's literal start is a public identifier
that is no prefix of any attribute nn.Module has (its methods: `register_...`, `apply`, `load_state_dict`) nor of a
dunder. What it can reach then is only what the answer's own class put there (its layers, its parameters)."""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from agent.harness.names import chain_root
from agent.harness.ownself import SELF, is_own_self

_PUBLIC_START = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@lru_cache(maxsize=1)
def _module_attributes() -> frozenset[str]:
    import torch.nn as nn

    return frozenset(dir(nn.Module)) | frozenset(vars(nn.Module(), ).keys())


def reaches_only_own(obj: ast.expr, name: ast.expr) -> bool:
    """Whether getattr(obj, name), name an f-string, can only read an attribute the answer's own module set."""
    if not isinstance(name, ast.JoinedStr) or not name.values:
        return False
    first = name.values[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return False
    prefix = first.value
    if _PUBLIC_START.fullmatch(prefix) is None:
        return False
    if any(attr.startswith(prefix) for attr in _module_attributes()):
        return False
    root = chain_root(obj)
    if not (isinstance(root, ast.Name) and root.id in SELF and is_own_self(root)):
        return False
    node: ast.expr = obj
    while isinstance(node, ast.Attribute):  # self.a.b: a public path (the attribute check sees each link as well)
        if node.attr.startswith("_"):
            return False
        node = node.value
    return node is root
