"""The hand review of the public sweep's static refusals (bench/sweep_public.py), as data: each kind of refusal seen in
the public answers, whether it is one to defend to the answer's author (reach: escape, monkeypatch, clock, process,
secret; or code that cannot run on this Triton) or a false refusal of honest code (style), and why.

A refusal no entry matches is `unreviewed`: a new kind, or a changed message, that a person must read (--review)."""

from __future__ import annotations

import re
from collections import Counter
from typing import NamedTuple


class Kind(NamedTuple):
    name: str
    pattern: str  # searched in the violation's message
    judgement: str  # "defensible" or "false"
    why: str


KINDS = [
    Kind("private init helper", r"_calculate_fan_in_and_fan_out` is private", "false",
         "nn.Linear/ConvNd's own reset_parameters, copied: computes fan-in from a weight's shape, reaches nothing"),
    Kind("computed getattr on own nn.GRU/LSTM", r"getattr with a computed name", "false",
         "`getattr(self.gru, f\"weight_ih_l{layer}\")`: nn.RNN's documented per-layer names, a constant public "
         "prefix on the answer's own submodule"),
    Kind("import torch.utils.checkpoint", r"torch\.utils", "false",
         "activation checkpointing; under no_grad it only calls the function"),
    Kind("import einops", r"import of `einops`", "false",
         "the problem file itself imports einops.rearrange; a pure reshaping library (no files, processes, memory)"),
    Kind("import random", r"import of `random`", "false",
         "a seed for a dropout mask (the problem, dropout in training mode, cannot be judged anyway)"),
    Kind("import numpy", r"import of `numpy`", "defensible",
         "numpy reaches files and raw memory (np.fromfile, np.memmap, np.ctypeslib); the use is np.log2(8): "
         "math.log2 does it"),
    Kind("tensor address as an integer", r"address may be read only for its alignment", "defensible",
         "`t.data_ptr()` passed as a kernel argument: memory reached by a number, not a tensor, is invisible to the "
         "run-time record of what each launch read and wrote; pass the tensor"),
    Kind("tl.pointer_type", r"pointer_type`: not allowed", "defensible",
         "annotates kernel parameters that receive `data_ptr()` integers: pointers made from integers"),
    Kind("tl.tanh (absent)", r"does not exist in Triton", "defensible",
         "not in the installed Triton (3.9): the kernel would not compile; the message names the fix"),
    Kind("kernel never launched", r"never launched", "defensible",
         "a dummy kernel beside a PyTorch forward: no Triton work to judge"),
]


def kind_of(message: str) -> Kind | None:
    return next((k for k in KINDS if re.search(k.pattern, message)), None)


def answer_judgement(r: dict) -> str | None:
    """For a statically refused answer: "defensible" if any of its refusals is, "false" if all are false (the
    answer is honest and refused only for its shape), "unreviewed" if one is of no known kind; None if not refused."""
    static = [v for v in r.get("violations", []) if v["kind"] == "static"]
    if not static:
        return None
    kinds = [kind_of(v["message"]) for v in static]
    if any(k is None for k in kinds):
        return "unreviewed"
    return "defensible" if any(k.judgement == "defensible" for k in kinds if k) else "false"


def review_table(results: list[dict]) -> str:
    """Answers per kind of static refusal and source, with the judgement and why; then answers refused only
    falsely."""
    sources = sorted({r["source"] for r in results})
    counts: Counter[tuple[str, str]] = Counter()
    for r in results:
        seen = {(k.name if (k := kind_of(v["message"])) else "unreviewed") for v in r.get("violations", [])
                if v["kind"] == "static"}
        for name in seen:
            counts[(name, r["source"])] += 1
    rows = ["| kind | " + " | ".join(sources) + " | all | judged | why |", "|---|" + "---:|" * (len(sources) + 1)
            + "---|---|"]
    for k in [*KINDS, Kind("unreviewed", "", "?", "a kind not yet read by a person: --review lists it")]:
        n = [counts[(k.name, s)] for s in sources]
        if sum(n):
            rows.append(f"| {k.name} | " + " | ".join(map(str, n)) + f" | {sum(n)} | {k.judgement} | {k.why} |")
    per = {s: Counter(answer_judgement(r) for r in results if r["source"] == s) for s in sources}
    for j, label in (("defensible", "answers refused, at least one refusal defensible"),
                     ("false", "answers refused only for their shape (false refusals)"), ("unreviewed", "answers unreviewed")):
        n = [per[s][j] for s in sources]
        rows.append(f"| **{label}** | " + " | ".join(map(str, n)) + f" | {sum(n)} | | |")
    return "\n".join(rows)
