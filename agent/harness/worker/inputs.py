"""Inputs, weights and outputs as both kinds of worker see them: the reference worker and the candidate's worker
must draw exactly the same inputs from the same seeds, so both use these functions (imported only by workers)."""

from __future__ import annotations

import hashlib
import secrets
from types import ModuleType
from typing import Any


def make_inputs(module: ModuleType, distribution: str, seed: int, device: str) -> list[Any]:
    """The problem's get_inputs() (seeded), with floating tensors redrawn for the other distributions: "randn" N(0, 1),
    "offset" 5 + 2 N(0, 1), "randn*S" S N(0, 1) (a small S keeps a saturating problem in its linear range:
    agent.harness.judge.saturation), zero where the problem's own draw has structural zeros (some, not all, elements)."""
    import torch

    torch.manual_seed(seed)
    base = list(module.get_inputs())
    if distribution != "problem":
        gen = torch.Generator().manual_seed(seed + 1)
        scale = scale_of(distribution)
        for i, t in enumerate(base):
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                r = torch.randn(t.shape, generator=gen, dtype=t.dtype)
                if distribution == "offset":
                    r = r * 2.0 + 5.0
                elif scale is not None:
                    r = r * scale
                elif distribution != "randn":
                    raise ValueError(f"unknown input distribution {distribution!r}")
                zeros = t == 0
                if bool(zeros.any()) and not bool(zeros.all()):
                    # the problem's structural zeros stay (torch.triu/tril, a mask): an answer may honestly rely on
                    # what get_inputs promises (2 public answers to KernelBench's triangular matmuls were called wrong)
                    r = r.masked_fill(zeros, 0.0)
                base[i] = r
    # The global generator must not keep the inputs' seed: torch.initial_seed() in forward would name it, and the
    # forward could draw the same inputs again, a copy of the data no operator derived from them (PyTorch computing
    # on it would not count as computing on the data). A fresh unpredictable seed: what the candidate draws after
    # this is unrelated to the inputs.
    torch.manual_seed(secrets.randbits(62))
    return [t.to(device) if isinstance(t, torch.Tensor) else t for t in base]


def scale_of(distribution: str) -> float | None:
    """S of a "randn*S" distribution, else None."""
    head, _, tail = distribution.partition("*")
    if head != "randn" or not tail:
        return None
    try:
        return float(tail)
    except ValueError:
        return None


def refill(buffers: list[Any], seed: int, device: str, normal_: Any, generator: Any) -> None:
    """New N(0, 1) content in every floating input buffer, drawn on the device from `seed` (timed calls: the same
    buffers, never the same content). `normal_` and `generator` are the harness's own references, taken before any
    candidate code ran."""
    import torch

    for i, b in enumerate(buffers):
        if isinstance(b, torch.Tensor) and b.is_floating_point():
            normal_(b, generator=generator(device=device).manual_seed(seed * 64 + i))


def build(module: ModuleType, cls: type, seed: int, device: str) -> Any:
    """cls(*get_init_inputs()) with the weights drawn from `seed` (the same for Model and ModelNew)."""
    import torch

    torch.manual_seed(seed)
    init = module.get_init_inputs()
    torch.manual_seed(seed)
    return cls(*init).to(device)


def weights(module: ModuleType, seed: int, device: str) -> dict[str, Any]:
    """The problem Model's state_dict at `seed`, detached copies (the Model itself is not kept: a candidate must
    not find it in its process)."""
    model = build(module, module.Model, seed, device)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    del model
    return state


def copy_matching_weights(state: dict[str, Any], dst: Any) -> None:
    """Copy `state` into dst where keys and shapes match: same weights whatever order ModelNew's init draws them in.
    A weight ModelNew's init derived from its own draw (the divisor folded into the conv: `weight.div_(d)`,
    `weight.data *= s`, a bias shifted) is kept: copying would undo the fold and judge an honest answer incorrect.
    Derived means perfectly correlated with the Model's weight while not equal to it; a draw in another order is
    uncorrelated. Keeping it grants nothing: ModelNew must still give the Model's outputs."""
    theirs = dst.state_dict()
    same = {k: v for k, v in state.items()
            if k in theirs and theirs[k].shape == v.shape and not _derived(theirs[k], v)}
    if same:
        dst.load_state_dict(same, strict=False)


def _derived(mine: Any, ref: Any) -> bool:
    """`mine` an affine image of `ref` (|correlation| > 0.999) without being equal to it."""
    import torch

    if not (mine.is_floating_point() and ref.is_floating_point()) or ref.numel() < 2:
        return False
    # the common case (the same draw) without a copy: kb_51's 8192x8192 weight is 0.5 GB in fp64
    if mine.dtype == ref.dtype and mine.device == ref.device and torch.equal(mine, ref):
        return False
    a = mine.detach().to(device=ref.device, dtype=torch.float64).flatten()
    b = ref.detach().to(dtype=torch.float64).flatten()
    if torch.equal(a, b):
        return False
    a, b = a - a.mean(), b - b.mean()
    scale = float(a.norm() * b.norm())
    return scale > 0 and abs(float(a @ b)) / scale > 0.999


def module_weights(model: Any, torch: Any) -> list[Any]:
    """A module's parameters and buffers, its submodules' too, read from the instances' own dictionaries: none of
    the candidate's code runs (its class may override parameters(), named_modules() or __getattr__)."""
    out: list[Any] = []
    seen: set[int] = set()
    stack = [model]
    while stack:
        m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        d = object.__getattribute__(m, "__dict__")
        for name in ("_parameters", "_buffers"):
            table = d.get(name)
            if type(table) is dict:
                out += [t for t in dict.values(table) if type(t) in (torch.Tensor, torch.nn.Parameter)]
        mods = d.get("_modules")
        if type(mods) is dict:
            stack += [c for c in dict.values(mods) if issubclass(type(c), torch.nn.Module)]
    return out


def digest(x: Any) -> str:
    import torch

    if isinstance(x, torch.Tensor):
        t = x.detach().to("cpu").contiguous()
        h = hashlib.blake2b(f"{t.dtype}{tuple(t.shape)}".encode(), digest_size=16)
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        return h.hexdigest()
    return repr(x)


class NotPlain(Exception):
    """A tensor the harness is about to read holds attributes of its own (see own_attributes)."""


def own_attributes(what: str, tensors: list[Any]) -> None:
    """Raise NotPlain where one of `tensors` (what the forward returned, or the inputs it was handed) holds attributes
    in its own namespace. A tensor's namespace shadows its class's methods: `t.detach()`, `t.untyped_storage()` or
    `t.is_floating_point()` read by the harness after the forward would call the candidate's function instead, outside
    any recording, and only in the calls the harness reads (the checked ones). Plain tensors have none."""
    import torch

    for k, t in enumerate(tensors):
        if isinstance(t, torch.Tensor) and vars(t):
            names = ", ".join(sorted(map(str, vars(t)))[:4])
            raise NotPlain(f"{what} {k} holds attributes of its own ({names}), which the harness would call where "
                           "it reads the tensor")


def flatten(out: Any) -> tuple[str, list[Any]]:
    """(kind, tensors): a Tensor or a tuple/list of Tensors; anything else is reported by its type. A tensor subclass
    is not a tensor here: its methods (and so the harness's copy of it) could run code of the candidate's; nor is a
    tensor with attributes of its own, which shadow its methods."""
    import torch

    def plain(o: Any) -> bool:
        return type(o) is torch.Tensor and not vars(o)

    if plain(out):
        return "tensor", [out]
    if type(out) in (tuple, list) and out and all(plain(o) for o in out):
        return f"{type(out).__name__}[{len(out)}]", list(out)
    kind = type(out).__name__ + (" with attributes of its own" if type(out) is torch.Tensor else "")
    return f"not a plain tensor: {kind}", []


def is_float(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor) and x.is_floating_point()
