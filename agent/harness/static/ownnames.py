"""A getattr whose name is computed, yet can only reach what the answer itself named: `getattr(self.lstm,
f"weight_ih_l{layer}")`, nn.RNN's documented per-layer parameters, written so by real answers (35 of LLMKernel's
answers; refused before as an escape).

A computed name is refused because it can be anything: `__globals__`, `_C`, `load`. Here it cannot: the object is
the answer's own module (self, or an attribute chain from self), and the name's literal start is a public identifier
that is no prefix of any attribute nn.Module has (its methods: `register_...`, `apply`, `load_state_dict`) nor of a
dunder. What it can reach then is only what the answer's own class put there (its layers, its parameters).

On any other object (`getattr(lstm, f"weight_ih_l{i}")` in a helper handed the layer, or `"bias_hh_l" + str(i)`) the
literal start must begin no attribute name of anything an answer can reach without its own code: the allowed
modules, their classes and submodules, tensors, modules, Triton's kernel objects and the builtins. Such a name can
then only be one that objects of the answer's making (or nn.RNN's per-layer parameters) carry."""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from agent.harness.static.names import chain_root
from agent.harness.static.ownself import SELF, is_own_self

_PUBLIC_START = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@lru_cache(maxsize=1)
def _module_attributes() -> frozenset[str]:
    import torch.nn as nn

    return frozenset(dir(nn.Module)) | frozenset(vars(nn.Module(), ).keys())


@lru_cache(maxsize=4)
def _reachable_attributes(allowed: frozenset[str]) -> frozenset[str]:
    """Every attribute name of what an answer reaches without its own code (computed once: about a second)."""
    import builtins
    import importlib
    import inspect

    import torch
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    names: set[str] = set()
    seen: set[int] = set()
    for m in sorted(allowed):
        try:
            mod = importlib.import_module(m)
        except Exception:  # an allowed module this install lacks reaches nothing
            continue
        for attr in dir(mod):
            names.add(attr)
            value = getattr(mod, attr, None)
            if (inspect.isclass(value) or inspect.ismodule(value)) and id(value) not in seen:
                seen.add(id(value))
                names.update(dir(value))
    for c in (torch.Tensor, torch.nn.Module, torch.nn.Parameter, JITFunction, Autotuner, Heuristics, object, type,
              builtins):
        names.update(dir(c))
    return frozenset(names)


def _literal_start(name: ast.expr) -> str | None:
    """The constant text a computed name starts with: an f-string's first part, or `"text" + ...`."""
    if isinstance(name, ast.JoinedStr) and name.values:
        first = name.values[0]
        return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
    if isinstance(name, ast.BinOp) and isinstance(name.op, ast.Add):
        left = name.left
        if isinstance(left, ast.Constant) and isinstance(left.value, str):
            return left.value
        return _literal_start(left)
    return None


def reaches_only_own(obj: ast.expr, name: ast.expr, allowed: frozenset[str]) -> bool:
    """Whether getattr(obj, name), name computed, can only read an attribute the answer itself set (`allowed`: the
    modules an answer may import)."""
    prefix = _literal_start(name)
    if prefix is None or _PUBLIC_START.fullmatch(prefix) is None:
        return False
    if any(attr.startswith(prefix) for attr in _module_attributes()):
        return False
    root = chain_root(obj)
    if not (isinstance(root, ast.Name) and root.id in SELF and is_own_self(root)):
        return not any(attr.startswith(prefix) for attr in _reachable_attributes(allowed))
    node: ast.expr = obj
    while isinstance(node, ast.Attribute):  # self.a.b: a public path (the attribute check sees each link as well)
        if node.attr.startswith("_"):
            return False
        node = node.value
    return node is root
