"""Relative errors against an fp64 truth, and eager fp32's own: computed inside the reference worker (eager's errors
on shaken inputs, fp64 checks) and in the parent (agent.harness.judge.validate). Here, in the worker's room, because a
worker imports nothing of the parent's side."""

from __future__ import annotations

import math
from typing import Any

from agent.harness.worker.truth import representable, wrong_in_kind


def rel_error(out: Any, truth: Any) -> float:
    """max |out - truth| / max |truth| over the truth's finite elements, in fp64; inf where out is wrong in kind
    (`wrong_in_kind`: NaN/Inf where the truth is finite, anything but the truth's own NaN/Inf where it is not).
    Never NaN: a truth with NaN in it (KLDivLoss of a log of a negative) made this NaN, which passed every
    `error > tolerance`; a truth with an Inf made the scale inf, and every error 0."""
    import torch

    o = out.detach().to("cpu", torch.float64)
    t = representable(truth.detach().to("cpu", torch.float64), out.dtype)
    if o.shape != t.shape:
        return float("inf")
    if o.numel() == 0:
        return 0.0
    if bool(wrong_in_kind(o, t).any()):
        return float("inf")
    fin = torch.isfinite(t)
    if not bool(fin.any()):
        return 0.0
    scale = max(float(t[fin].abs().max()), 1e-12)
    return float((o[fin] - t[fin]).abs().max()) / scale


def scale_fit(out: Any, truth: Any) -> tuple[float, float]:
    """The constant factor `out` is off by (s with out ~ (1 + s) * truth, least squares over the finite elements, in
    fp64) and its standard error from the scatter left around it; (0, 0) where that has no meaning (a wrong shape,
    fewer than two elements, a truth of zeros).

    Rounding noise (fp32, a conv in TF32) lands above and below the truth, and its factor is a fraction of its worst
    element's error, a few standard errors at most (a few outputs with TF32-sized noise each: as large as their
    worst error); a wrong divisor or scale (H*W + 1) moves every element the same way. Where a problem's own
    numerics widen the tolerance (gap44's TF32 conv: 4 x 2.1e-4 at full size), a 1/(H*W + 1) error of 2.3e-4 hides
    under the worst-element test, not under this one."""
    import torch

    o = out.detach().to("cpu", torch.float64)
    t = truth.detach().to("cpu", torch.float64)
    if o.shape != t.shape or o.numel() < 2:
        return 0.0, 0.0
    fin = torch.isfinite(t) & torch.isfinite(o)
    o, t = o[fin], t[fin]
    norm = float((t * t).sum())
    if norm <= 0.0 or not math.isfinite(norm) or o.numel() < 2:
        return 0.0, 0.0
    off = float(((o - t) * t).sum()) / norm
    left = o - (1.0 + off) * t
    return off, math.sqrt(float((left * left).sum()) / (o.numel() - 1) / norm)


def worst_index(out: Any, truth: Any) -> tuple[int, ...]:
    """The index of `out`'s worst element against the truth: its first wrong in kind, else its largest difference."""
    import torch

    o = out.detach().to("cpu", torch.float64)
    t = representable(truth.detach().to("cpu", torch.float64), out.dtype)
    bad = wrong_in_kind(o, t)
    if not bool(bad.any()):
        bad = torch.where(torch.isfinite(t), (o - t).abs(), -1.0)
        bad = bad == bad.max()
    return tuple(int(v) for v in bad.nonzero()[0])


SHAKES = 3  # eager calls on ulp-shaken inputs per trial: one lucky draw in 3-4 gave a numerically-zero output exactly


def shaken(inputs: list[Any], seed: int) -> list[Any]:
    """The inputs with every float element moved by one ulp, up or down at random (integer inputs as they are).

    Eager's error on one draw is a poor base for an output that is numerically zero (KernelBench #23: the mean of a
    group norm's output): its rounding noise varies by orders of magnitude between draws and is exactly 0 on some, so
    an honest answer computed in another order failed at ~500x eager's lucky 2e-19. Any fp32 implementation has to
    round its inputs and intermediates at this level, so eager's error on the shaken inputs is noise the candidate
    cannot be blamed for either; on a well-conditioned output it stays ~1e-7 and the tolerance floor still rules."""
    import torch

    from agent.harness.worker.inputs import is_float

    g = torch.Generator().manual_seed(seed)
    out = []
    for x in inputs:
        if not is_float(x):
            out.append(x)
            continue
        up = torch.randint(0, 2, x.shape, generator=g, dtype=torch.bool).to(x.device)
        out.append(torch.nextafter(x, torch.where(up, torch.inf, -torch.inf).to(x.dtype)))
    return out


def eager_errors(model: Any, inputs: list[Any], out32: list[Any], truth: list[Any],
                 seed: int) -> tuple[list[float], list[float]]:
    """Per output: eager fp32's worst relative error against the truth, and its largest constant factor
    (|scale_fit|'s factor), on the inputs (`out32`, already computed, perhaps traced) and on SHAKES ulp-shaken copies of
    them (`shaken`)."""
    import torch

    from agent.harness.worker.inputs import flatten

    errors = [rel_error(o, t) for o, t in zip(out32, truth)]
    scales = [abs(scale_fit(o, t)[0]) for o, t in zip(out32, truth)]
    for k in range(SHAKES):
        with torch.no_grad():
            _, again = flatten(model(*shaken(inputs, seed * 7919 + k)))
        errors = [max(e, rel_error(o, t)) for e, o, t in zip(errors, again, truth)]
        scales = [max(f, abs(scale_fit(o, t)[0])) for f, o, t in zip(scales, again, truth)]
    return errors, scales


def errors_vs_fp64(model: Any, forwards: list[Any], inputs: list[Any]) -> list[float]:
    """Each forward's worst relative error against `model` run in fp64 on the same inputs (the reference's truth)."""
    import copy

    import torch

    from agent.harness.worker.inputs import flatten, is_float

    with torch.no_grad():
        _, truth = flatten(copy.deepcopy(model).double()(*[x.double() if is_float(x) else x for x in inputs]))
        outs = [flatten(f(*inputs))[1] for f in forwards]
    if not truth:
        return [float("inf")] * len(forwards)
    return [max(rel_error(o, t) for o, t in zip(out, truth)) if len(out) == len(truth) else float("inf")
            for out in outs]
