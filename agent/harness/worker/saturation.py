"""Where a problem's truth sits at a bound on every drawn input, the draw that keeps it in range (the measurement
behind agent.harness.judge.saturation, which says why). Runs where the truth can be computed at the sizes judged: in
the parent at CPU mode's small sizes, in a sandboxed worker (mode `saturation`) on the GPU at the full sizes, which
the parent cannot afford. Imports nothing from the parent side.
"""

from __future__ import annotations

from typing import Any, Callable

from agent.harness.worker.inputs import build, flatten, is_float, make_inputs

FLAT = 1e-3  # a relative range under ten times the tolerance floor: a wrong constant near the truth would pass
ENDS = 0.01  # within this share of the range of either end, an element sits at a bound
INSIDE = 0.1  # the share of elements (of 8 or more) that must lie inside the ends
SCALES = (1e-1, 1e-2, 1e-3, 1e-4)


def varies(outputs: list[Any]) -> bool | None:
    """Whether every output of two elements or more varies: its range at least FLAT of its largest magnitude and,
    with 8 elements or more, a tenth of them inside its ends (a tanh at -1 and 1, a clamp at 0 and 1 does not);
    None where no output has two elements."""
    found = []
    for t in outputs:
        if t.numel() < 2:
            continue
        top, low, high = float(t.abs().max()), float(t.min()), float(t.max())
        if top == 0 or (high - low) / top < FLAT:
            found.append(False)
            continue
        band = ENDS * (high - low)
        inside = ((t > low + band) & (t < high - band)).double().mean()
        found.append(t.numel() < 8 or float(inside) >= INSIDE)
    return all(found) if found else None


def _truth(model: Any, module: Any, distribution: str, device: str) -> list[Any]:
    import torch

    inputs = make_inputs(module, distribution, 0, device)
    with torch.no_grad():
        return flatten(model(*[x.double() if is_float(x) else x for x in inputs]))[1]


def scales(load: Callable[[int], Any], distributions: list[list[str]], device: str,
           failed: Callable[[int, Exception], None] = lambda i, e: None) -> list[tuple[int, str]]:
    """(size index, "randn*S") for each size (its problem module `load(i)`, its drawn distributions) whose fp64 truth
    hardly varies on every draw and varies at S, the first of SCALES that moves it. A size whose Model fails is
    skipped (`failed` hears why): the reference worker says what is wrong with it."""
    out: list[tuple[int, str]] = []
    for i, drawn in enumerate(distributions):
        try:
            module = load(i)
            model = build(module, module.Model, 0, device).double()
            if any(varies(_truth(model, module, d, device)) is not False for d in drawn):
                continue  # varies on one draw at least, or cannot (a scalar)
            for scale in SCALES:
                if varies(_truth(model, module, f"randn*{scale:g}", device)):
                    out.append((i, f"randn*{scale:g}"))
                    break
        except Exception as e:
            failed(i, e)
    return out
