"""Which of a Triton kernel's parameters it may store to, read from its source (the GPU's ablated call).

In CPU mode the interpreter records every store, so the ablated call destroys exactly what each launch wrote. A
GPU launch records nothing of the kind: the ablated call destroyed every floating argument that is not an input or
a weight, and an argument a kernel only reads was destroyed too. An answer returning `torch.zeros` (the right answer
of a problem whose output is identically zero) handed to a kernel that only reads it then looked like the kernels'
work (KernelBench #23: judged correct on an H200). Read from the kernel's source, the parameters its stores and
atomics can reach (through assignments, pointer arithmetic, block pointers, descriptors and the jit functions it
calls) are the ones a launch may have written; only those are destroyed.

The answer is an over-approximation where the source cannot tell (a call into something that is not a jit function
of the answer's, inline assembly): every parameter handed to it counts as stored. None where the source cannot be
read at all: the caller then destroys every floating argument, as before.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from typing import Any

_STORES = {"store", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
           "atomic_xchg", "atomic_cas"}
_OPAQUE = {"inline_asm_elementwise"}
_DEPTH = 8  # jit functions calling jit functions
_BUILTINS = frozenset(dir(builtins))


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _names(node: ast.AST | None) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def _function(fn: Any) -> ast.FunctionDef | None:
    if not _jit(fn):
        return None
    own = vars(fn)  # the instance's own attributes: Triton 3.9 keeps the source in _src (src is a property), 3.6 in src
    src = next((v for v in (own.get("_src"), own.get("src")) if isinstance(v, str)), None)
    if not isinstance(src, str):
        return None
    try:
        tree = ast.parse(textwrap.dedent(src))
    except SyntaxError:
        return None
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)


def _dependencies(fdef: ast.FunctionDef) -> dict[str, set[str]]:
    """name -> the names its values were computed from (every assignment to it, loops included)."""
    deps: dict[str, set[str]] = {}

    def bind(target: ast.AST, sources: set[str]) -> None:
        for t in ast.walk(target):
            if isinstance(t, ast.Name):
                deps.setdefault(t.id, set()).update(sources)

    for node in ast.walk(fdef):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, _names(node.value))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            bind(node.target, _names(node.value) | _names(node.target))
        elif isinstance(node, (ast.For, ast.comprehension)):
            bind(node.target, _names(node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            bind(node.optional_vars, _names(node.context_expr))
        elif isinstance(node, ast.NamedExpr):
            bind(node.target, _names(node.value))
    return deps


def _closure(names: set[str], deps: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(deps.get(n, ()))
    return seen


def _is_triton_language(node: ast.expr, env: dict[str, Any]) -> bool:
    """`tl` (or any name bound to triton.language, or `triton.language` spelled out)."""
    if isinstance(node, ast.Name):
        value = env.get(node.id)
        return getattr(value, "__name__", "") in ("triton.language", "triton.language.core")
    return isinstance(node, ast.Attribute) and node.attr == "language"


def _resolve(node: ast.expr, env: dict[str, Any]) -> Any:
    """What a called name or attribute chain is, read off the kernel's globals (None: not known statically)."""
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, env)
        # statically: a candidate's object answers no lookup with its own code (a property, __getattr__)
        return inspect.getattr_static(base, node.attr, None) if base is not None else None
    return None


def _jit(value: Any) -> bool:
    from triton.runtime.jit import JITFunction

    return isinstance(value, JITFunction)


def _triton_builtin(value: Any) -> bool:
    module = inspect.getattr_static(value, "__module__", "")
    return isinstance(module, str) and module.startswith("triton.language") and not _jit(value)


def _pointer_of(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg in ("pointer", "ptr", "base")), None)


def _stored_names(fn: Any, depth: int) -> tuple[list[str], set[str]] | None:
    """(the function's parameters, the names its stores may write through), or None where unreadable."""
    fdef = _function(fn)
    if fdef is None or depth > _DEPTH:
        return None
    params = [a.arg for a in fdef.args.args]
    py = inspect.getattr_static(fn, "fn", None)
    env: dict[str, Any] = dict(getattr(py, "__globals__", {}) or {})
    code, cells = getattr(py, "__code__", None), getattr(py, "__closure__", None) or ()
    env.update({n: c.cell_contents for n, c in zip(code.co_freevars if code else (), cells)
                if _has_contents(c)})  # JITFunction's capture scope: a helper defined in a factory
    written: set[str] = set()
    for call in (n for n in ast.walk(fdef) if isinstance(n, ast.Call)):
        f = call.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name in _STORES:
            if isinstance(f, ast.Attribute) and not _is_triton_language(f.value, env):
                written |= _names(f.value)  # desc.store(...), a block pointer's method: the object is the target
            else:
                written |= _names(_pointer_of(call))
        elif name in _OPAQUE:
            written |= set().union(*(_names(a) for a in call.args))
        elif (callee := _resolve(f, env)) is None and not isinstance(f, ast.Name):
            continue  # a method of a value (x.to(...), acc.reshape(...)): tensors' methods compute
        elif (callee := _resolve(f, env)) is not None and _triton_builtin(callee):
            continue  # tl.load, tl.sum, libdevice.tanh: they compute, never store
        elif callee is None and isinstance(f, ast.Name) and f.id in _BUILTINS:
            continue  # range, min, len: Python's, run by the compiler
        elif callee is None or _jit(callee):
            inner = _stored_names(callee, depth + 1) if callee is not None else None
            args = list(call.args)
            if inner is None:  # not known statically: whatever it is handed may be stored through
                written |= set().union(*(_names(a) for a in args), *(_names(k.value) for k in call.keywords))
                continue
            inner_params, inner_written = inner
            for i, a in enumerate(args):
                if i < len(inner_params) and inner_params[i] in inner_written:
                    written |= _names(a)
            for k in call.keywords:
                if k.arg in inner_written:
                    written |= _names(k.value)
    return params, _closure(written, _dependencies(fdef))


def stored_parameters(fn: Any) -> frozenset[str] | None:
    """The parameters of jit function `fn` its stores may write through; None where its source cannot tell."""
    found = _stored_names(fn, 0)
    if found is None:
        return None
    params, written = found
    return frozenset(p for p in params if p in written)


def stored_tensors(args: Any, stores: tuple[list[str], frozenset[str] | None] | None, tensors: list[Any],
                    torch: Any) -> list[Any]:
    """The tensor arguments a GPU launch may have stored to (agent.harness.worker.storetargets): the launcher's last
    arguments are the kernel's, in its parameters' order. Every tensor argument where that cannot be told."""
    positional = args[0] if isinstance(args, tuple) and args and isinstance(args[0], tuple) else ()
    # Triton >= 3.3's launcher: grid (3), stream, function, packed metadata, launch metadata, two hooks, then every
    # parameter's value; any other count is another launcher: tell nothing apart
    if stores is None or stores[1] is None or not stores[0] or len(positional) != len(stores[0]) + 9:
        return tensors
    names, stored = stores[0], stores[1]
    out = []
    for param, value in zip(names, positional[len(positional) - len(names):]):
        if param in stored:
            if isinstance(value, torch.Tensor):
                out.append(value)
            elif not isinstance(value, (int, float, bool, str, type(None))):
                return tensors  # a descriptor or a wrapper holds the tensor: tell nothing apart
    return out
