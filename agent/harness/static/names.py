"""Name resolution for the static policy: which local names stand for which module paths (import aliases and
plain assignments), and which names a module takes from builtins (scopes resolved by the interpreter's own symtable).

Everything here is linear in the size of the code: one walk per fixed-point pass, a bounded number of passes.
"""

from __future__ import annotations

import ast
import builtins
import symtable

_PASSES = 4  # alias fixed point: `a = torch; b = a.nn; c = b.functional` needs three


def dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`tl.load` -> 'triton.language.load' (through aliases); None for anything but a plain name chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    head = aliases.get(node.id)
    if head is None:
        return None
    return ".".join([head, *reversed(parts)])


def binds(tree: ast.AST, name: str, allowed: set[ast.AST]) -> bool:
    """Whether anything in the code but the `allowed` nodes binds `name`: any occurrence other than a read (an
    assignment, a walrus, an import alias, a def, a pattern capture, a global declaration, an argument)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            if n.id == name and not isinstance(n.ctx, ast.Load) and n not in allowed:
                return True
        elif n not in allowed and not isinstance(n, (ast.Attribute, ast.Constant)):
            for field, value in ast.iter_fields(n):
                if isinstance(n, ast.ImportFrom) and field == "module":  # the module read from, not a name bound
                    continue
                if value == name or (isinstance(value, list) and name in value):
                    return True
    return False


def chain_root(node: ast.AST) -> ast.AST:
    """The innermost value of an attribute chain (`a.b.c` -> the Name `a`, `f().x` -> the Call)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def aliases(tree: ast.AST, roots: set[str]) -> dict[str, str]:
    """Local name -> dotted path, from imports and from `X = <path under an imported root>` assignments anywhere
    (walrus and annotated assignments too). A name bound to a module path anywhere counts everywhere: the
    conservative reading for a checker (it can only find more paths)."""
    found: dict[str, str] = {}
    assigns: list[tuple[str, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    found[a.asname] = a.name
                else:
                    found.setdefault(a.name.split(".")[0], a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name != "*":
                    found[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    assigns.append((t.id, node.value))
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name) and node.value:
            assigns.append((node.target.id, node.value))
    for _ in range(_PASSES):
        changed = False
        for name, value in assigns:
            path = dotted(value, found)
            if path and path.split(".")[0] in roots and name not in found:
                found[name] = path
                changed = True
        if not changed:
            break
    return found


def builtin_uses(code: str) -> dict[str, str]:
    """Names the code reads from builtins (not bound in the scope that reads them, nor at module level), with the
    kind of scope that reads them. Uses the compiler's own scope analysis (symtable): exact for every Python scope
    rule (class bodies, comprehensions, nonlocal, global), unlike a hand-written walk."""
    table = symtable.symtable(code, "candidate", "exec")
    module_bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()
                    or s.is_parameter() or s.is_namespace()}
    builtin_names = set(dir(builtins))
    found: dict[str, str] = {}
    stack = [table]
    while stack:
        t = stack.pop()
        stack.extend(t.get_children())
        for s in t.get_symbols():
            name = s.get_name()
            if not s.is_referenced() or name in module_bound or name not in builtin_names:
                continue
            if t.get_type() == "module" or not (s.is_local() or s.is_free()):
                found.setdefault(name, t.get_type())
    return found
