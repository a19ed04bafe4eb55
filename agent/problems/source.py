"""A problem file's size globals, read from its source, and the file compiled with some of them set to other values.

Overrides are applied to the source, before the file runs, so that every global computed from a size at import time
follows it: with `out_channels` overridden, `bias_shape = (out_channels, 1, 1)` is computed from the new value (setting
the attribute after the file ran left it at the old one, and the reference then failed at that size).

A *size global* is a name the file binds exactly once, directly at its top level, to a number literal or constant
arithmetic on them (`+ - * // **`): `batch_size = 16`, `batch_size: int = 16`, `height = width = 64`,
`D, H, W = 24, 32, 32`, `scale = -0.5`, `M = 8192 * 2`.
Only those can be overridden; a name computed from others (`hidden = 4 * dim`), bound twice (`n = 8` ... `n += 1`),
bound inside an `if`/`for`/function, or by an import is not one, and overriding it is a UserError naming why: it
follows the literals it derives from. A number written inside a tuple (`bias_shape = (16, 1, 1)`) is the file's own
constant, never a size: it does not follow `out_channels = 16` (which 16 of a file is which size cannot be known), so
a derived size at which the reference then fails is skipped (agent.problems.runnable); write it from the size global.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import operator
from collections import Counter
from pathlib import Path
from types import CodeType, ModuleType

from agent.errors import UserError
from agent.schema import Number, SizeOverrides

_counter = itertools.count()


# Constant arithmetic a size may be written in (`M = 8192 * 2`, `K = 131072 * 8`: 12 of KernelBench's 100 level-1
# files): evaluated here, on numbers only, never by eval(). `/` is left out: it makes a float, which is no size.
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
               ast.Pow: operator.pow}
_MAX_MAGNITUDE = 2**63  # past any tensor dimension: `10 ** 10 ** 10` is refused before it is computed


def _number(node: ast.expr) -> Number | None:
    """The value of a number literal (`3`, `2.5`, `-1`) or of constant arithmetic on them (`8192 * 2`, `2 ** 14`,
    `(1024 + 1) // 2`), else None (bools are not numbers here; a name makes it computed, not a size)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        return None if inner is None else -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _number(node.left), _number(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > _MAX_MAGNITUDE):
            return None
        try:
            value = _ARITHMETIC[type(node.op)](left, right)
        except (ArithmeticError, ValueError):  # `1 // 0`, `0 ** -1`
            return None
        if isinstance(value, (int, float)) and abs(value) <= _MAX_MAGNITUDE:
            return value
    return None


def _literal_pairs(stmt: ast.stmt) -> list[tuple[str, Number]] | None:
    """(name, number) for every name a top-level statement binds when it binds only names to number literals."""
    if isinstance(stmt, ast.AnnAssign):
        value = _number(stmt.value) if stmt.value is not None else None
        return [(stmt.target.id, value)] if isinstance(stmt.target, ast.Name) and value is not None else None
    if not isinstance(stmt, ast.Assign):
        return None
    pairs: list[tuple[str, Number]] = []
    whole = _number(stmt.value)
    for target in stmt.targets:
        if isinstance(target, ast.Name) and whole is not None:
            pairs.append((target.id, whole))
        elif (isinstance(target, (ast.Tuple, ast.List)) and isinstance(stmt.value, (ast.Tuple, ast.List))
              and len(target.elts) == len(stmt.value.elts)):
            for t, v in zip(target.elts, stmt.value.elts):
                n = _number(v)
                if not isinstance(t, ast.Name) or n is None:
                    return None
                pairs.append((t.id, n))
        else:
            return None
    return pairs


def _bound_names(node: ast.AST) -> list[str]:
    """Every name a module-level statement binds (compound statements included, function and class bodies not)."""
    names: list[str] = []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
            names.append(child.id)
        elif isinstance(child, ast.ExceptHandler) and child.name:
            names.append(child.name)
        if not isinstance(child, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
            names.extend(_bound_names(child))
    return names


class SizeSource:
    """A problem file's source: its size globals, and the file compiled with some of them overridden."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.text = path.read_text()
            self.tree = ast.parse(self.text, filename=str(path))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as e:
            raise UserError(f"cannot read problem file {path}: {type(e).__name__}: {e}") from e
        self._counts: Counter[str] = Counter()
        for stmt in self.tree.body:
            self._counts.update(_bound_names(stmt))
        for node in ast.walk(self.tree):  # `global n` in a function: n may be rebound whenever it runs
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                self._counts.update(node.names)
        self.used = {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        self.sizes: dict[str, Number] = {}
        for stmt in self.tree.body:
            for name, value in _literal_pairs(stmt) or []:
                if self._counts[name] == 1:
                    self.sizes[name] = value

    def _why_not(self, name: str) -> str | None:
        """Why `name` cannot be overridden (None: it can)."""
        if name in self.sizes:
            return None
        if self._counts[name] == 0:
            return f"problem {self.path.stem} has no size global {name!r}"
        if self._counts[name] > 1:
            how = f"bound {self._counts[name]} times"
        else:
            stmt = next((s for s in self.tree.body if name in _bound_names(s)), None)
            how = f"`{_one_line(ast.unparse(stmt))}`" if stmt is not None else "bound inside a function"
            if stmt is not None and not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                how = f"bound by {type(stmt).__name__.lower()} `{_one_line(ast.unparse(stmt))}`"
        return (f"problem {self.path.stem}: {name!r} is not a size global (a name bound once, at the top level, to a "
                f"number): it is {how}; override the sizes it is computed from")

    def compile(self, overrides: SizeOverrides) -> CodeType:
        """The file's code with each overridden size global bound to its new value where the file binds it."""
        for name in overrides:
            why = self._why_not(name)
            if why is not None:
                raise UserError(why)
        tree = ast.parse(self.text, filename=str(self.path))  # a fresh tree: the rewrite changes it in place
        if overrides:
            body: list[ast.stmt] = []
            for stmt in tree.body:
                pairs = _literal_pairs(stmt)
                if not pairs or not any(n in overrides for n, _ in pairs):
                    body.append(stmt)
                    continue
                for name, value in pairs:  # `height = width = 64` with height overridden: width keeps 64
                    new = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                     value=ast.Constant(value=overrides.get(name, value)))
                    body.append(ast.copy_location(new, stmt))  # tracebacks keep the file's line numbers
            tree.body = body
            ast.fix_missing_locations(tree)
        return compile(tree, str(self.path), "exec")


def _one_line(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def load_module(path: Path, overrides: SizeOverrides | None = None) -> ModuleType:
    """Execute `path` as a fresh module (never cached in sys.modules) with size globals rebound."""
    name = f"_agent_problem_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise UserError(f"cannot load problem file {path}")
    module = importlib.util.module_from_spec(spec)
    code = SizeSource(path).compile(overrides or {})  # overrides bound where the file binds them: derived ones follow
    try:
        exec(code, module.__dict__)
    except Exception as e:  # a user's file: report, don't crash
        raise UserError(f"problem file {path} failed to load: {type(e).__name__}: {e}") from e
    return module
