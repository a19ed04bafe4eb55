"""The candidate's own objects, for the private-attribute rule (agent.harness.static.policy): `self._x` reads its own
state, and so does `self.head._launch(y)` or `head._launch(y)` where `head` can only be an instance of one of its own
classes (a nested module with private helpers). What `self._x` may reach inside such a class, `self.head._x` may
reach from outside it: nothing new. A torch object's private state (`t._version`, `t._cdata`) stays refused.

Static and conservative: a name or `self` attribute counts only where every way the code binds it is an assignment
of a call of one of its own classes, and nothing could bind it otherwise."""

from __future__ import annotations

import ast

from agent.harness.static.names import binds
from agent.harness.static.ownself import SELF

# How an nn.Module attribute is bound by a name computed at run time (past the assignments seen here), and the
# tables behind them: a buffer registered under a name, then read as `self.name`, would be a tensor
_REGISTERS = {"register_buffer", "register_parameter", "add_module", "register_module", "set_submodule"}
_TABLES = {"_modules", "_buffers", "_parameters", "__dict__", "__setattr__"}


def _own_call(value: ast.expr | None, classes: set[str]) -> bool:
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in classes


def _single_target(node: ast.AST) -> ast.expr | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return node.targets[0]
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return node.target
    return None


def own_instances(tree: ast.Module, own_classes: set[str]) -> tuple[set[str], set[str]]:
    """(names, self attributes) bound only to instances of the candidate's own classes. A class counts where only its
    class statement binds its name (not rebound to a torch type) and calling it makes an instance of it (no
    `__new__`, no metaclass)."""
    import torch

    defs = {n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    plain = {d.name for d in defs if not d.keywords and not any(
        isinstance(i, (ast.FunctionDef, ast.AsyncFunctionDef)) and i.name == "__new__" for i in d.body)}
    classes = {c for c in own_classes & plain if not binds(tree, c, {d for d in defs if d.name == c})}
    names: dict[str, set[ast.AST]] = {}
    ok_targets: set[ast.AST] = set()
    for node in ast.walk(tree):
        target = _single_target(node)
        if target is None or not _own_call(node.value, classes):  # type: ignore[attr-defined]
            continue
        if isinstance(target, ast.Name):
            names.setdefault(target.id, set()).add(target)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in SELF:
            ok_targets.add(target)
    attrs: dict[str, bool] = {}
    for node in ast.walk(tree):  # every binding of an attribute of that name, on any object (a for target too)
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            attrs[node.attr] = attrs.get(node.attr, True) and node in ok_targets
    if _binds_by_name(tree):
        attrs = {}
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    module_attrs = set(dir(torch.nn.Module()))  # what nn.Module has, or sets on an instance itself (training)
    own_names = {name for name, allowed in names.items() if not binds(tree, name, allowed)}
    own_attrs = {a for a, ok in attrs.items() if ok and a not in strings and a not in module_attrs
                 and not _in_class_body(defs, a)}
    return own_names, own_attrs


def _binds_by_name(tree: ast.Module) -> bool:
    """Whether the code could bind a module attribute under a name it computes: a registration whose name is not a
    literal, or the tables behind nn.Module's attributes."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr in _TABLES:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _REGISTERS:
            first = n.args[0] if n.args else next((k.value for k in n.keywords if k.arg in ("name", "target")), None)
            if not isinstance(first, ast.Constant):
                return True
    return False


def _in_class_body(defs: set[ast.ClassDef], name: str) -> bool:
    """A class attribute (a method, a property, a value) of that name: `self.name` would find it first."""
    for d in defs:
        for item in d.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and item.name == name:
                return True
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(item)
                   if isinstance(item, (ast.Assign, ast.AnnAssign, ast.AugAssign))):
                return True
    return False


def is_own(value: ast.expr, own_names: set[str], own_attrs: set[str]) -> bool:
    """Whether `value` (what a private attribute is read from) is one of the candidate's own instances."""
    if isinstance(value, ast.Name):
        return value.id in own_names
    return (isinstance(value, ast.Attribute) and value.attr in own_attrs and isinstance(value.value, ast.Name)
            and value.value.id in SELF)
