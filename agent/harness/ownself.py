"""Whose private attributes `self._x` reads. The static check lets a method read private attributes of its own
object (`self._cache`), but Python binds `self` to whatever the method is called with: `Layout.guard(torch)` runs
`return self._C` on the module torch. So `self`/`cls` is the object's own only as the first parameter of a method
of the candidate's class, and such a class's methods are not taken from the class to be called on another object:
no `Cls.method(obj)` (but `Base.method(self, ...)`), no `type(o).method`, `o.__class__.method`, `cls.method(obj)`,
and the class is not handed around as a value (a parameter would carry it past these checks); instantiating it,
subclassing it, isinstance and its static/class methods and attributes stay free."""

from __future__ import annotations

import ast
from collections.abc import Iterator

SELF = {"self", "cls"}


def enclosing_function(node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | None:
    parent = getattr(node, "_parent", None)
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        parent = getattr(parent, "_parent", None)
    return parent


def is_own_self(name: ast.Name) -> bool:
    """`self`/`cls` here is the first parameter of a method of a class the candidate wrote (needs `_parent` links)."""
    fn = enclosing_function(name)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(getattr(fn, "_parent", None),
                                                                                      ast.ClassDef):
        return False
    params = [*fn.args.posonlyargs, *fn.args.args]
    return bool(params) and params[0].arg == name.id


def _plain_methods(cls: ast.ClassDef) -> set[str]:
    def plain(f: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        return not any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in f.decorator_list)

    names = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and plain(f)}
    for n in cls.body:  # `h = g` in the class body: the same function under another name
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, (ast.Name, ast.Attribute, ast.Lambda)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _reads_private_self(cls: ast.ClassDef) -> bool:
    return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in SELF
               and n.attr.startswith("_") and not (n.attr.startswith("__") and n.attr.endswith("__"))
               for n in ast.walk(cls))


def unbound_uses(tree: ast.Module, modules: set[str]) -> Iterator[tuple[ast.AST, str]]:
    """(node, message) for each use of a class that reads private attributes of `self` other than through its own
    objects (needs `_parent` links). `modules`: the names bound to library paths (imports), whose decorators only
    take the class (dataclass)."""
    every = [c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)]
    classes = [c for c in every if _reads_private_self(c)]
    if not classes:
        return
    names = {c.name for c in classes}
    while True:  # their subclasses inherit the methods
        more = {c.name for c in every if c.name not in names and any(isinstance(b, ast.Name) and b.id in names
                                                                      for b in c.bases)}
        if not more:
            break
        names |= more
    methods = set().union(*(_plain_methods(c) for c in classes))
    for c in every:
        if c.name not in names:
            continue
        # a class decorator or metaclass of the candidate's is handed the class itself, and may keep it
        for d in [*c.decorator_list, *(k.value for k in c.keywords if k.arg == "metaclass")]:
            root = d.func if isinstance(d, ast.Call) else d
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id not in modules:
                yield d, (f"class `{c.name}` handed to `{root.id}` of the candidate's (a decorator or metaclass): its "
                          "methods read `self._...` and could be called on another object")
    for c in every:  # hooks Python hands a class to: a descriptor's owner, a class subscript's class
        for f in c.body:
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name in _HANDED_A_CLASS:
                yield f, (f"`{f.name}` is handed a class, which it could keep: the methods of `"
                          f"{', '.join(sorted(n.name for n in classes))}` read `self._...` and could then be called "
                          "on another object")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in methods and _class_like(node.value, names):
            call = getattr(node, "_parent", None)
            first = call.args[0] if isinstance(call, ast.Call) and call.func is node and call.args else None
            if not (isinstance(first, ast.Name) and first.id in SELF and is_own_self(first)):
                yield node, (f"`{node.attr}` taken from the class, not from one of its objects: a method that reads "
                             "`self._...` would read another object's private attributes")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and \
                (node.id in names or node.id == "cls" and is_own_self(node)) and not _free_use(node):
            yield node, (f"the class `{node.id}` handed around as a value: its methods read `self._...` and could be "
                         "called on another object")


_HANDED_A_CLASS = {"__set_name__", "__get__", "__set__", "__delete__", "__class_getitem__", "__prepare__"}


def _class_like(value: ast.expr, names: set[str]) -> bool:
    """An expression that is (or may be) the class itself rather than one of its objects."""
    if isinstance(value, ast.Name):
        return value.id in names or value.id == "cls"
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("type", "super"):
        if value.func.id == "type":
            return True
        bound = value.args[1] if len(value.args) == 2 else None  # super(C, self) binds to self, super(C, C) does not
        return bound is not None and not (isinstance(bound, ast.Name) and bound.id == "self")
    return isinstance(value, ast.Attribute) and value.attr == "__class__"


def _free_use(name: ast.Name) -> bool:
    """Uses of a class name that cannot call its methods on another object: instantiation, an attribute (judged on
    its own above), a base of a class, super's first argument, isinstance/issubclass, an exception to raise or catch,
    an annotation."""
    if _in_annotation(name):
        return True  # evaluated only by typing, which calls no method
    parent = getattr(name, "_parent", None)
    if isinstance(parent, ast.Call) and parent.func is name:
        return True
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "super" and \
            parent.args and parent.args[0] is name:
        return True  # super(ModelNew, self)
    if isinstance(parent, ast.Attribute):
        return True
    if isinstance(parent, ast.ClassDef) and name in parent.bases:
        return True
    if isinstance(parent, (ast.Raise, ast.ExceptHandler)):
        return True
    if isinstance(parent, ast.Tuple):  # isinstance(x, (A, B)), except (A, B)
        parent = getattr(parent, "_parent", None)
        if isinstance(parent, ast.ExceptHandler):
            return True
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and \
        parent.func.id in ("isinstance", "issubclass") and name is not parent.func


def _in_annotation(node: ast.AST) -> bool:
    child, parent = node, getattr(node, "_parent", None)
    while parent is not None:
        if isinstance(parent, ast.arg) and parent.annotation is child or \
                isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and parent.returns is child or \
                isinstance(parent, ast.AnnAssign) and parent.annotation is child:
            return True
        if isinstance(parent, (ast.stmt, ast.arg)):
            return False
        child, parent = parent, getattr(parent, "_parent", None)
    return False
