"""Launch arguments as the tracer judges them (agent.harness.worker.trace): what Triton could take for a pointer.

Triton takes an object with a data_ptr for a pointer and asks it for its address inside the launch (the GPU's
launcher; the interpreter asks for its untyped_storage), where the tracer records no operator: such an object runs
code there unseen, and hands the kernel memory the tracer never copied. A launch is given tensors the tracer copies
and plain values; anything else that could answer as a pointer is reported, and the parent refuses it
(agent.harness.judge.rules). The sets these checks compare with are taken before the candidate is imported.
"""

from __future__ import annotations

from typing import Any


def known_types(torch: Any) -> frozenset[type]:
    """The launch argument types Triton reads without running any code of the candidate's (numbers, strings, dtypes,
    constexprs, the launcher's own metadata) or that the tracer copies (tensors; a descriptor's base is checked on
    its own). Taken before the candidate is imported: a class it defines later is in none of them."""
    import importlib

    import triton.language as tl

    found: set[type] = {type(None), bool, int, float, str, torch.dtype, torch.Tensor, torch.nn.Parameter, torch.Size,
                        tl.constexpr}
    stack: list[type] = [tl.dtype]
    while stack:
        cls = stack.pop()
        found.add(cls)
        stack.extend(cls.__subclasses__())
    for module, name in (("triton.tools.tensor_descriptor", "TensorDescriptor"), ("triton.compiler.compiler", "LazyDict")):
        try:
            found.add(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            pass
    return frozenset(found)


# What Triton asks of a pointer argument (the GPU's launcher: data_ptr; the interpreter: untyped_storage), and the
# hooks with which an object of the candidate's answers any name it is asked for (every builtin type defines
# __getattribute__: only a class made by the candidate is suspect for those)
_POINTER_NAMES = frozenset({"data_ptr", "untyped_storage"})
_HOOKS = frozenset({"__getattr__", "__getattribute__"})


def classes_now() -> frozenset[type]:
    """Every class that exists now (before the candidate is imported): its own classes are none of them."""
    found: set[type] = set()
    stack: list[type] = [object]
    while stack:
        cls = stack.pop()
        if cls in found:
            continue
        found.add(cls)
        stack.extend(type.__subclasses__(cls))
    return frozenset(found)


def _pointer_like(x: Any, before: frozenset[type]) -> bool:
    """Whether Triton could take `x` for a pointer: a class that has what Triton asks a pointer for (torch's own
    storages too: memory the tracer never copies), a class of the candidate's (one made after `before`) that could
    answer any name, or such a name in the object's own namespace. Read from namespaces only: vars() of a class is a
    mapping, and a class that could answer a lookup itself is pointer-like before its instance is looked at."""
    if any(_POINTER_NAMES & vars(k).keys() or k not in before and _HOOKS & vars(k).keys() for k in type(x).__mro__):
        return True
    own: dict = vars(x) if getattr(type(x), "__dictoffset__", 0) else {}
    return bool(_POINTER_NAMES & own.keys())


def _tensor_with_attributes(x: Any) -> bool:
    """A tensor whose own namespace holds names: they shadow its class's methods, so Triton asking it for its
    address (data_ptr, untyped_storage) or the tracer for its extent would call the candidate's code instead."""
    import torch

    return isinstance(x, torch.Tensor) and bool(vars(x))


def foreign_arguments(obj: Any, known: frozenset[type], before: frozenset[type]) -> list[str]:
    """The type names of launch arguments Triton could take for a pointer that are not tensors the tracer copies:
    Triton asks such an object for its address (the interpreter: its storage) inside the launch, where the tracer
    records no operator; it runs code there, and hands the kernel memory the tracer never copied. `known`: the
    tensors and plain values (a descriptor passes where its base is one); any other object passes where it is not
    pointer-like (the launcher's own metadata, an IntEnum: Triton reads its value). Both sets are taken before the
    candidate is imported."""
    out, stack = [], [obj]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is dict:
            stack.extend(x.values())
        elif t in (tuple, list) or t in known and isinstance(x, tuple):  # a torch.Size
            stack.extend(x)
        elif t in known:
            base = vars(x).get("base") if hasattr(t, "__dataclass_fields__") else None
            if base is not None and type(base) not in known:
                out.append(f"{t.__name__} of a {type(base).__name__}")
            elif base is not None:
                stack.append(base)
            elif _tensor_with_attributes(x):
                out.append(f"a {t.__name__} with attributes of its own ({', '.join(sorted(map(str, vars(x)))[:3])})")
        elif _pointer_like(x, before):
            out.append(t.__name__)
    return out
