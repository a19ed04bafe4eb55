"""The hand review of the public sweep's static refusals (bench/suite/sweep_public.py), as data: each kind of refusal seen in
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


# The local sample's verdicts read by hand (`--sample 20 --seed 0`, CPU mode): whether each verdict is right, and if
# not, whose limit it shows. "right": the verdict stands; "missed": a wrong answer judged correct (checked by running
# it outside the judge); "false": an honest answer refused for its shape; "cpu-mode":
# CUDA-only code or a kernel too slow for the interpreter, which CPU mode cannot judge; "harness": the problem, not
# the answer, kept the judge from a verdict.
ANSWERS = {
    "dlblas-kernelagent/answers/level1_99_TripletMarginLoss.py": (
        "false", "per-row losses in Triton, then `.mean()` of 128 values in PyTorch: the output is PyTorch's"),
    "dlblas-openevolve/answers/level3_10_ResNet101.py": (
        "right", "the kernel's masks broadcast [1, HW] against [C_in, 1] over a [C_in] offset: fails at any size"),
    "llmkernel/answers/level2_18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp.py": ("cpu-mode", "`assert x.is_cuda`"),
    "dlblas-kernelagent/answers/level2_95_Matmul_Add_Swish_Tanh_GELU_Hardtanh.py": (
        "missed", "tanh as (exp(2s)-1)/(exp(2s)+1): inf/inf past s = 44; with the input scaled by 100 the output is "
        "-1 where the Model gives 0.84 (max error 1.84); no trial draws values that large"),
    "dlblas-openevolve/answers/level1_22_Tanh.py": (
        "missed", "tanh as (exp(2x)-1)/(exp(2x)+1): NaN for x >= 45 (torch.tanh: 1); no trial draws values that "
        "large"),
    "llmkernel/answers/level1_2_Standard_matrix_multiplication_.py": (
        "harness", "sizes written as products (`M = 1024 * 2`) are not reduced: the fp64 truth of a 2048x8192 @ "
        "8192x4096 matmul on the CPU gives no verdict in 240 s"),
    "dlblas-kernelagent/answers/level2_16_ConvTranspose2d_Mish_Add_Hardtanh_Scaling.py": ("right", "correct"),
    "dlblas-openevolve/answers/level3_15_DenseNet121.py": (
        "right", "Triton does only the final 1x1 average pool; every conv, norm and the classifier run in PyTorch "
        "(2 of its 3 CPU sizes skipped: DenseNet's pools need more than 28x28)"),
    "llmkernel/answers/level1_96_HuberLoss.py": ("right", "returns shape [1] where the Model returns a 0-d tensor"),
    "dlblas-kernelagent/answers/level1_19_ReLU.py": ("right", "correct"),
    "dlblas-openevolve/answers/level2_7_Conv3d_ReLU_LeakyReLU_GELU_Sigmoid_BiasAdd.py": (
        "right", "GELU approximated as x*sigmoid(1.702x): relative error 1e-3 against a 1e-4 tolerance"),
    "llmkernel/answers/level1_61_conv_transposed_3D__square_input__square_kernel.py": (
        "cpu-mode", "`if not x.is_cuda:` PyTorch's conv"),
    "dlblas-kernelagent/answers/level1_6_Matmul_with_large_K_dimension_.py": (
        "cpu-mode", "`if A.is_cuda and B.is_cuda:` Triton, else torch.matmul"),
    "dlblas-openevolve/answers/level1_46_Average_Pooling_3D.py": (
        "cpu-mode", "one program per output element (BLOCK_SIZE=1, 27 scalar loads each): too slow for the "
        "interpreter at the wide CPU size (the harness's 180 s)"),
    "llmkernel/answers/level1_70_conv_transposed_3D__asymmetric_input__square_kernel.py": (
        "cpu-mode", "`assert x.is_cuda and weight.is_cuda`"),
    "dlblas-kernelagent/answers/level2_37_Matmul_Swish_Sum_GroupNorm.py": (
        "right", "`BLOCK_SIZE=group_size` in tl.arange: only power-of-two group sizes work (cpu-wide: 96/32 = 3; the "
        "GPU's odd size, 992/32 = 31, fails too). Its 'cpu' trials passed on nothing: 32 channels in 32 groups make "
        "GroupNorm degenerate, eager's error 3e7 sets a tolerance of 2.4e8"),
    "dlblas-openevolve/answers/level3_29_SwinMLP.py": (
        "harness", "the reference runs at none of the CPU sizes (the Model's default img_size=224 is not a size "
        "global: 'Input image size (28*28) doesn't match model (224*224)'): one line says so, no hang; the answer "
        "defines no ModelNew anyway (no_code in the static pass)"),
    "llmkernel/answers/level2_55_Matmul_MaxPool_Sum_Scale.py": ("cpu-mode", "`assert x.is_cuda`"),
    "dlblas-kernelagent/answers/level2_31_Conv2d_Min_Add_Multiply.py": (
        "cpu-mode", "`if x.is_cuda:` Triton, else PyTorch"),
    "dlblas-openevolve/answers/level1_47_Sum_reduction_over_a_dimension.py": ("right", "correct"),
}


def answers_table(results: list[dict], rel: dict[str, str]) -> str:
    """The verdicts of the answers read by hand (`rel`: answer -> its path under the sweep folder)."""
    rows = ["| answer | verdict | read by hand | why |", "|---|---|---|---|"]
    judged: Counter[str] = Counter()
    for r in sorted(results, key=lambda r: rel[r["answer"]]):
        if rel[r["answer"]] in ANSWERS:
            j, why = ANSWERS[rel[r["answer"]]]
            judged[j] += 1
            rows.append(f"| {rel[r['answer']].replace('/answers/', ': ')} | {r['verdict']} | {j} | {why} |")
    if not judged:
        return ""
    return "\n".join(rows) + "\n\nRead by hand: " + ", ".join(f"{n} {j}" for j, n in judged.most_common())
