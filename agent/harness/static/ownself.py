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

from agent.harness.static.names import binds, chain_root

SELF = {"self", "cls"}
# Decorators that leave a method a method: Python still binds its first parameter to the object it is called on (to
# the class, for classmethod). Any other (staticmethod, or a decorator of the candidate's, which may return one) lets
# the caller hand the function any object as its `self`.
_BINDING = {"property", "classmethod", "cached_property", "abstractmethod", "no_grad", "inference_mode", "enable_grad",
            "ignore", "unused", "export", "override", "final"}
_PROPERTY_PARTS = {"setter", "getter", "deleter"}


def enclosing_function(node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | None:
    parent = getattr(node, "_parent", None)
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        parent = getattr(parent, "_parent", None)
    return parent


def is_own_self(name: ast.Name) -> bool:
    """`self`/`cls` here is the first parameter of a method of a class the candidate wrote (needs `_parent` links):
    read in the method itself or in a closure inside it (a lambda hook, a nested helper) that does not bind the name
    again; the method itself never rebinds it."""
    fn = enclosing_function(name)
    while fn is not None and name.id not in _params(fn):
        if _binds_in_scope(fn, name.id):
            return False
        fn = enclosing_function(fn)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(getattr(fn, "_parent", None),
                                                                                      ast.ClassDef):
        return False
    params = [*fn.args.posonlyargs, *fn.args.args]
    if not params or params[0].arg != name.id:
        return False
    memo = fn.__dict__.setdefault("_agent_own_self", {})  # one answer per method and name: reads repeat it
    if name.id not in memo:
        memo[name.id] = all(_keeps_binding(d, fn) for d in fn.decorator_list) and not _binds_in_scope(fn, name.id)
    return bool(memo[name.id])


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    a = fn.args
    return {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]}


def _binds_in_scope(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, name: str) -> bool:
    """Whether `fn`'s own scope (not a nested function's or class's) binds `name` other than as a parameter (walked
    once per function and name: every read inside asks again)."""
    memo = fn.__dict__.setdefault("_agent_binds", {})
    if name not in memo:
        memo[name] = _walk_binds(fn, name)
    return bool(memo[name])


def _walk_binds(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, name: str) -> bool:
    todo: list[ast.AST] = list(fn.body) if isinstance(fn.body, list) else [fn.body]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
            todo.extend([*node.decorator_list])  # evaluated in this scope; the body is another scope
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            return True
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return True
        if isinstance(node, (ast.MatchAs, ast.MatchStar, ast.ExceptHandler)) and getattr(node, "name", None) == name:
            return True
        if isinstance(node, ast.MatchMapping) and node.rest == name:
            return True
        todo.extend(ast.iter_child_nodes(node))
    return False


def _module_of(node: ast.AST) -> ast.AST:
    while getattr(node, "_parent", None) is not None:
        node = node._parent  # type: ignore[attr-defined]
    return node


def _library_name(module: ast.AST, name: str) -> bool:
    """`name` is a builtin or bound only by imports (a library's), never by the candidate's own code."""
    imported = {a for n in ast.walk(module) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    return not binds(module, name, imported)  # type: ignore[arg-type]


def _keeps_binding(decorator: ast.expr, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The decorator is one of the library's that keep `fn` a method (`torch.no_grad()`, `functools.cached_property`,
    `property`), or `@name.setter` of a property the same class defines."""
    f = decorator.func if isinstance(decorator, ast.Call) else decorator
    module = _module_of(fn)
    if isinstance(f, ast.Name):
        return f.id in _BINDING and _library_name(module, f.id)
    if not isinstance(f, ast.Attribute):
        return False
    root = chain_root(f)
    if f.attr in _PROPERTY_PARTS and isinstance(f.value, ast.Name):
        cls = getattr(fn, "_parent", None)
        return isinstance(cls, ast.ClassDef) and any(
            isinstance(i, (ast.FunctionDef, ast.AsyncFunctionDef)) and i.name == f.value.id and any(
                isinstance(d, ast.Name) and d.id == "property" for d in i.decorator_list) for i in cls.body)
    return f.attr in _BINDING and isinstance(root, ast.Name) and _library_name(module, root.id)


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
            root = chain_root(d.func if isinstance(d, ast.Call) else d)
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
