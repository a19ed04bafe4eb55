"""An answer split into blocks, joined: the block that defines ModelNew, preceded by the earlier blocks (definitions
only) it needs (agent.harness.static.extract finds the blocks)."""

from __future__ import annotations

import ast


def with_helpers(code: str, earlier: list[str]) -> str:
    """`code`, preceded by the earlier blocks (definitions only) that bind names it reads but never binds, or imports
    from a module the reply itself writes (`from kernels import gap` below a block headed kernels.py)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    blocks: list[tuple[str, ast.Module]] = []
    for body in earlier:
        try:
            other = ast.parse(body)
        except (SyntaxError, ValueError):
            continue
        if not all(_definition(n) for n in other.body):
            # a usage snippet (calls, loops), or definitions followed by a quick check (`x = torch.randn(...)`,
            # `print(gap(x).shape)`): running those at import would be wrong, so only its code is kept
            body = _code_only(body, other)
            other = ast.parse(body)
        blocks.append((body, other))
    code, imported = _without_sibling_imports(code, tree, set().union(*(_bound_names(t) for _, t in blocks)))
    missing = _free_names(tree) | imported
    if not missing:
        return code
    needed: list[str] = []
    for body, other in reversed(blocks):
        if _bound_names(other) & missing:
            needed.insert(0, body)
            missing -= _bound_names(other)
            # what the joined block needs from blocks above it: the names it reads that nothing else binds, and those
            # it reads as it runs (a decorator's `triton`), which the final block's imports would bind too late
            missing |= (_free_names(other) - _bound_names(tree)) | (_run_time_names(other) & _free_names(other))
    return _join([*needed, code]) if needed else code


def _run_time_names(tree: ast.Module) -> set[str]:
    """Names a module reads while it runs, not later inside its functions: decorators, defaults, class bases and
    bodies, and its other top-level statements."""
    nodes: list[ast.AST] = []
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nodes += [*n.decorator_list, *n.args.defaults, *(d for d in n.args.kw_defaults if d is not None)]
        else:
            nodes.append(n)
    return {x.id for node in nodes for x in ast.walk(node) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load)}


def _without_sibling_imports(code: str, tree: ast.Module, elsewhere: set[str]) -> tuple[str, set[str]]:
    """An answer written as several files imports one from another (`from kernels import gap_scale`, or `from
    .kernels import`): a module no installed package provides (or a relative one) whose every imported name earlier
    blocks bind is theirs, the import blanked here (the blocks are joined into one module; dropping an import grants
    nothing). A library's import stays, whatever a draft above defines. Returns the code and those names."""
    import importlib.util

    lines, names = code.split("\n"), set()
    for n in tree.body:
        if isinstance(n, ast.ImportFrom) and n.module not in (None, "__future__") and (
                n.level or importlib.util.find_spec(n.module.split(".")[0]) is None):
            took = [a.name for a in n.names]
            if "*" not in took and all(a.asname in (None, a.name) for a in n.names) and set(took) <= elsewhere:
                names.update(took)
                for i in range(n.lineno - 1, n.end_lineno or n.lineno):
                    lines[i] = ""
    return ("\n".join(lines), names) if names else (code, names)


def _join(parts: list[str]) -> str:
    """Blocks joined into one module. Each block written as a file of its own may open with `from __future__
    import annotations`, which Python accepts only at the top of a module: those imports are gathered into one line
    there (each left as a blank line where it was, so the rest of the block keeps its shape)."""
    features: list[str] = []
    out: list[str] = []
    for part in parts:
        lines = part.split("\n")
        for n in ast.parse(part).body:
            if isinstance(n, ast.ImportFrom) and n.module == "__future__":
                features += [a.name for a in n.names if a.name not in features]
                for i in range(n.lineno - 1, n.end_lineno or n.lineno):
                    lines[i] = ""
        out.append("\n".join(lines))
    joined = "\n\n".join(out)
    return f"from __future__ import {', '.join(features)}\n{joined}" if features else joined


def _code_only(body: str, tree: ast.Module) -> str:
    """A block that also runs things, reduced to the code it defines: its functions, classes, imports and constants
    (`BLOCK = 256`); every other top-level statement is blanked out (its lines left empty). An assignment of anything
    but a literal is the snippet's own (`x = torch.randn(...)`, `model = ModelNew(...)`)."""
    lines = body.split("\n")
    for n in tree.body:
        if not _code(n):
            for i in range(n.lineno - 1, n.end_lineno or n.lineno):
                lines[i] = ""
    return "\n".join(lines)


_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign, ast.Pass)


def _definition(n: ast.stmt) -> bool:
    """A statement that only binds names: a definition, or a try/if choosing between definitions (a version-dependent
    import: `try: from triton.language.extra import libdevice` / `except ImportError: ...`)."""
    if isinstance(n, _DEFINITIONS) or _docstring(n):
        return True
    if isinstance(n, ast.Try):
        return all(_definition(s) for s in [*n.body, *n.orelse, *n.finalbody, *(s for h in n.handlers for s in h.body)])
    if isinstance(n, ast.If):
        return all(_definition(s) for s in [*n.body, *n.orelse])
    return False


def _code(n: ast.stmt) -> bool:
    """A statement that defines code or a constant (as _definition, with assignments of literals only)."""
    if isinstance(n, (ast.Assign, ast.AnnAssign)):
        try:
            ast.literal_eval(n.value) if n.value is not None else None
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        return True
    if isinstance(n, ast.Try):
        return all(_code(s) for s in [*n.body, *n.orelse, *n.finalbody, *(s for h in n.handlers for s in h.body)])
    if isinstance(n, ast.If):
        return all(_code(s) for s in [*n.body, *n.orelse])
    return _definition(n)


def _docstring(n: ast.stmt) -> bool:
    return isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)


def _bound_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for n in _top_level(tree.body):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                names.update(x.id for x in ast.walk(t) if isinstance(x, ast.Name))
    return names


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The module's statements with those inside top-level try/if blocks (a guarded import binds at module level)."""
    out: list[ast.stmt] = []
    for n in body:
        if isinstance(n, ast.Try):
            out += _top_level([*n.body, *n.orelse, *n.finalbody, *(s for h in n.handlers for s in h.body)])
        elif isinstance(n, ast.If):
            out += _top_level([*n.body, *n.orelse])
        else:
            out.append(n)
    return out


def _free_names(tree: ast.Module) -> set[str]:
    """Names read somewhere that the module binds nowhere (and are not builtins)."""
    import builtins

    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in n.names)
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return read - bound - set(dir(builtins))
