"""The hand review of the public sweep's static refusals (bench/suite/sweep_public.py), as data: each kind of refusal seen in
the public answers, whether it is one to defend to the answer's author (reach: escape, monkeypatch, clock, process,
secret; or code that cannot run on this Triton) or a false refusal of honest code (style), and why.

A refusal no entry matches is `unreviewed`: a new kind, or a changed message, that a person must read (--review).
Over 400 lines because it is data: one entry per kind of refusal reviewed, with its reason."""

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


# The verdicts read by hand, CPU mode: the local sample (`--sample 20 --seed 0`), then every rule_violation,
# incorrect and runtime_error of the whole sweep of levels 1-2 at ff8fa3f (348 answers), each against its problem file;
# "incorrect" ones checked by running the answer outside the judge where its code left a doubt. Whether each verdict is
# right, and if not, whose limit it shows. "right": the verdict stands; "missed": a wrong answer judged correct
# (checked by running it outside the judge); "false": an honest answer refused or called wrong (checked by judging it
# with the refusing rule off, or running it outside the judge); "cpu-mode": CUDA-only code or a kernel too slow for the
# interpreter, which CPU mode cannot judge; "harness": the problem, not the answer, kept the judge from a verdict.
ANSWERS = {
    # -- the 20-answer sample
    "dlblas-kernelagent/answers/level1_99_TripletMarginLoss.py": (
        "right", "per-row losses in Triton, `.mean()` of 128 values in PyTorch: correct (refused before the ablation "
        "replaced 'the output must come out of a launch')"),
    "dlblas-openevolve/answers/level3_10_ResNet101.py": (
        "right", "the kernel's masks broadcast [1, HW] against [C_in, 1] over a [C_in] offset: fails at any size"),
    "llmkernel/answers/level2_18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp.py": ("cpu-mode", "`assert x.is_cuda`"),
    "dlblas-kernelagent/answers/level2_95_Matmul_Add_Swish_Tanh_GELU_Hardtanh.py": (
        "right", "tanh as (exp(2s)-1)/(exp(2s)+1): inf/inf past s = 44; the randn*100 trial now draws it (NaN); "
        "judged correct, 'missed', before that trial"),
    "dlblas-openevolve/answers/level1_22_Tanh.py": (
        "right", "tanh as (exp(2x)-1)/(exp(2x)+1): NaN for x >= 45 (torch.tanh: 1); the randn*100 trial now draws it; "
        "judged correct, 'missed', before that trial"),
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
    # -- correct (161), skimmed for wrong answers accepted. tl.dot on fp32 operands without input_precision="ieee"
    # rounds them to TF32 on a GPU (Triton's default); the interpreter's dot is exact. Judged again with the
    # interpreter's dot rounding its operands to TF32 as a GPU does, 13 of the 31 answers calling tl.dot fail at fp32:
    "dlblas-kernelagent/answers/level1_87_conv_pointwise_2D.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.00053 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-kernelagent/answers/level2_12_Gemm_Multiply_LeakyReLU.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.00048 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-kernelagent/answers/level2_33_Gemm_Scale_BatchNorm.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.0064 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-kernelagent/answers/level2_53_Gemm_Scaling_Hardtanh_GELU.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.012 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-kernelagent/answers/level2_59_Matmul_Swish_Scaling.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.00054 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-kernelagent/answers/level2_64_Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.00017 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-kernelagent/answers/level2_76_Gemm_Add_ReLU.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.00042 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-openevolve/answers/level1_87_conv_pointwise_2D.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.00053 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-openevolve/answers/level2_12_Gemm_Multiply_LeakyReLU.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.00048 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-openevolve/answers/level2_33_Gemm_Scale_BatchNorm.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.0064 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-openevolve/answers/level2_40_Matmul_Scaling_ResidualAdd.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.00041 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-openevolve/answers/level2_53_Gemm_Scaling_Hardtanh_GELU.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.012 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-openevolve/answers/level2_59_Matmul_Swish_Scaling.py": (
        "missed", "tl.dot at Triton's default TF32 (a GPU rounds its fp32 operands to 10 mantissa bits): exact in "
        "the interpreter, 0.00054 against the 1e-4 tolerance with TF32 emulated"),
    "dlblas-kernelagent/answers/level1_3_Batched_matrix_multiplication.py": (
        "harness", "tl.make_block_ptr: judged correct in this sweep, a runtime_error when judged again here (Triton "
        "3.9 removed block pointers): part of the sweep ran on another Triton, and its results do not say which"),
    # -- rule_violation (57): is the refused thing PyTorch doing the work, or a copy / a small finishing op?
    "dlblas-kernelagent/answers/level1_33_BatchNorm.py": (
        "right", "x.mean and x.var over (0, 2, 3) in PyTorch: both reductions of BatchNorm; Triton only normalizes"),
    "dlblas-kernelagent/answers/level1_51_Argmax_over_a_dimension.py": (
        "right", "Triton only for the last dim; at the problem's dim=1 the forward is torch.argmax"),
    "dlblas-kernelagent/answers/level1_56_conv_standard_2D__asymmetric_input__asymmetric_kernel.py": (
        "false", "F.unfold (aten.im2col, a gather copy) then a tiled Triton GEMM doing every FLOP: im2col counted as "
        "compute (operators.toml lists no copy but views); with the share off: correct, 2.2e-7"),
    "dlblas-kernelagent/answers/level1_60_conv_standard_3D__square_input__asymmetric_kernel.py": (
        "right", "`self.bias.data_ptr()` handed to the kernel as an integer (dead at the problem's bias=False; with "
        "bias=True a pointer the recorder cannot see)"),
    "dlblas-kernelagent/answers/level1_70_conv_transposed_3D__asymmetric_input__square_kernel.py": (
        "right", "`self.bias.data_ptr()` handed to the kernel as an integer (dead at bias=False)"),
    "dlblas-kernelagent/answers/level1_74_conv_transposed_1D_dilated.py": (
        "right", "`self.bias.data_ptr()` handed to the kernel as an integer (dead at bias=False)"),
    "dlblas-kernelagent/answers/level1_81_conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__.py": (
        "right", "every tensor handed to the kernel as `t.data_ptr()`: memory no launch argument names"),
    "dlblas-kernelagent/answers/level1_83_conv_depthwise_2D_square_input_asymmetric_kernel.py": (
        "right", "x, weight, output as `data_ptr()` integers typed with tl.pointer_type: pointers made from integers"),
    "dlblas-kernelagent/answers/level1_92_cumsum_exclusive.py": (
        "false", "torch.cat of a zero column and x, exactly the Model's own step, then the scan in Triton: aten.cat "
        "(a copy) counted as compute; with the share off: correct, 4.2e-7"),
    "dlblas-kernelagent/answers/level1_95_CrossEntropyLoss.py": (
        "false", "per-sample losses in Triton, `.mean()` of them in PyTorch: at cpu-odd num_classes is 7, the mean "
        "reads 1/7 of the logits, 0.143 > 0.125 of the largest tensor (0.1 at the file's size); with the share off: "
        "correct, 7e-8"),
    "dlblas-kernelagent/answers/level1_98_KLDivLoss.py": (
        "right", "torch.log over the whole predictions in PyTorch: an elementwise pass over an input"),
    "dlblas-kernelagent/answers/level2_11_ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm.py": (
        "right", "`tl.tanh`: absent in Triton 3.9, the kernel cannot compile"),
    "dlblas-kernelagent/answers/level2_23_Conv3d_GroupNorm_Mean.py": (
        "right", "nn.GroupNorm over the whole conv output in PyTorch; Triton only takes the final mean"),
    "dlblas-kernelagent/answers/level2_21_Conv2d_Add_Scale_Sigmoid_GroupNorm.py": (
        "right", "nn.GroupNorm over the whole intermediate in PyTorch"),
    "dlblas-kernelagent/answers/level2_28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply.py": (
        "right", "only the Linear in Triton: InstanceNorm, x + y and x * y over the whole output in PyTorch"),
    "dlblas-kernelagent/answers/level2_39_Gemm_Scale_BatchNorm.py": (
        "right", "Triton only under `not self.training`; the Model is judged in training mode (its default), where "
        "the forward is Linear, scale and BatchNorm in PyTorch"),
    "dlblas-kernelagent/answers/level2_41_Gemm_BatchNorm_GELU_GroupNorm_Mean_ReLU.py": (
        "right", "`tl.tanh`: absent in Triton 3.9"),
    "dlblas-kernelagent/answers/level2_35_Conv2d_Subtract_HardSwish_MaxPool_Mish.py": (
        "right", "MaxPool2d and mish over the intermediate in PyTorch"),
    "dlblas-kernelagent/answers/level2_43_Conv3d_Max_LogSumExp_ReLU.py": (
        "right", "MaxPool3d over the whole conv output in PyTorch"),
    "dlblas-kernelagent/answers/level2_42_ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply.py": (
        "right", "the global average pool (torch.mean over H, W of the whole conv output) in PyTorch; Triton only on "
        "the (N, C) means"),
    "dlblas-kernelagent/answers/level2_51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd.py": (
        "right", "Triton reduces x to per-row scalars (weights pre-summed); the residual add writing the whole "
        "(B, in_features) output, a pass over the input, is PyTorch's"),
    "dlblas-kernelagent/answers/level2_60_ConvTranspose3d_Swish_GroupNorm_HardSwish.py": (
        "right", "nn.GroupNorm over the whole intermediate in PyTorch"),
    "dlblas-kernelagent/answers/level2_65_Conv2d_AvgPool_Sigmoid_Sum.py": (
        "right", "AvgPool2d over the whole conv output in PyTorch"),
    "dlblas-kernelagent/answers/level2_73_Conv2d_BatchNorm_Scaling.py": (
        "right", "Triton only under `not self.training`: in the Model's training mode the forward is PyTorch's"),
    "dlblas-kernelagent/answers/level2_74_ConvTranspose3d_LeakyReLU_Multiply_LeakyReLU_Max.py": (
        "right", "MaxPool3d over the whole intermediate in PyTorch"),
    "dlblas-kernelagent/answers/level2_77_ConvTranspose3d_Scale_BatchNorm_GlobalAvgPool.py": (
        "right", "BatchNorm3d and the global average pool in PyTorch; Triton only scales"),
    "dlblas-kernelagent/answers/level2_83_Conv3d_GroupNorm_Min_Clamp_Dropout.py": (
        "right", "GroupNorm and dropout over the conv output in PyTorch; the kernel only fills zeros (the Model's "
        "output is identically 0: min(x, 0) clamped to [0, 1])"),
    "dlblas-kernelagent/answers/level2_80_Gemm_Max_Subtract_GELU.py": (
        "right", "at the problem's max_dim=1 returns torch.zeros with no launch: exact (x - mean over a size-1 dim is "
        "0) but no Triton work, as the manifest's kb23_zeros_no_kernel_wrote"),
    "dlblas-kernelagent/answers/level1_86_conv_depthwise_separable_2D.py": (
        "false", "the Model's own depthwise conv kept, the pointwise conv in Triton: refused because the family's "
        "total output (21.1 KB) is under the Model's two convs' (77 KB) / 1.25; run outside the judge: 1.5e-7 (under "
        "the judge with the share off the per-pixel grid times out: CPU mode's limit)"),
    "dlblas-kernelagent/answers/level2_84_Gemm_BatchNorm_Scaling_Softmax.py": (
        "right", "Triton only under `not self.training`: in the Model's training mode the forward is PyTorch's"),
    "dlblas-kernelagent/answers/level2_85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py": (
        "right", "nn.GroupNorm over the whole conv output in PyTorch"),
    "dlblas-kernelagent/answers/level2_8_Conv3d_Divide_Max_GlobalAvgPool_BiasAdd_Sum.py": (
        "right", "the divide and MaxPool3d over the whole conv output in PyTorch"),
    "dlblas-kernelagent/answers/level2_96_ConvTranspose3d_Multiply_Max_GlobalAvgPool_Clamp.py": (
        "right", "the scale multiply and MaxPool3d over the whole conv output in PyTorch"),
    "dlblas-kernelagent/answers/level2_92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py": (
        "right", "GroupNorm and the channel logsumexp in PyTorch; Triton only the pointwise middle"),
    "dlblas-kernelagent/answers/level2_97_Matmul_BatchNorm_BiasAdd_Divide_Swish.py": (
        "right", "Triton only under `not self.training`: in the Model's training mode the forward is PyTorch's"),
    "dlblas-kernelagent/answers/level2_79_Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max.py": (
        "right", "the multiply and InstanceNorm over the whole conv output in PyTorch"),
    "dlblas-openevolve/answers/level1_33_BatchNorm.py": (
        "right", "Triton only under `not self.training`: in the Model's training mode F.batch_norm does it all"),
    "dlblas-openevolve/answers/level1_61_conv_transposed_3D__square_input__square_kernel.py": (
        "right", "`self.bias.data_ptr()` handed to the kernel as an integer (dead at bias=False)"),
    "dlblas-openevolve/answers/level1_84_conv_depthwise_2D_asymmetric_input_square_kernel.py": (
        "right", "`self.bias.data_ptr()` handed to the kernel as an integer (dead at bias=False)"),
    "dlblas-openevolve/answers/level1_86_conv_depthwise_separable_2D.py": (
        "false", "the depthwise conv in Triton, the Model's own pointwise conv kept: refused because the family's "
        "total output (56.2 KB) is under the Model's two convs' (77 KB) / 1.25; with the share off: correct, 1.7e-7"),
    "dlblas-openevolve/answers/level1_95_CrossEntropyLoss.py": (
        "false", "per-sample losses in Triton, their `.mean()` in PyTorch: 1/7 of the logits at cpu-odd > 0.125 (see "
        "kernelagent's); with the share off: correct, 7e-8"),
    "dlblas-openevolve/answers/level1_92_cumsum_exclusive.py": (
        "false", "a correct scalar scan refused by the ablation on an empty output: the Model's `[:-1]` leaves 0 rows "
        "at cpu-wide (batch 1), and a 0-element output is 'still right' (the trial is drawn at random: judged again, "
        "correct, 1.4e-6)"),
    "dlblas-openevolve/answers/level2_13_ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling.py": (
        "right", "`tl.tanh`: absent in Triton 3.9"),
    "dlblas-openevolve/answers/level2_15_ConvTranspose3d_BatchNorm_Subtract.py": (
        "right", "BatchNorm3d (batch statistics, training mode) over the whole conv output in PyTorch"),
    "dlblas-openevolve/answers/level2_23_Conv3d_GroupNorm_Mean.py": (
        "right", "nn.GroupNorm over the whole conv output in PyTorch; Triton only takes the final mean"),
    "dlblas-openevolve/answers/level2_19_ConvTranspose2d_GELU_GroupNorm.py": (
        "right", "GELU over the whole conv output in PyTorch (GroupNorm in Triton)"),
    "dlblas-openevolve/answers/level2_21_Conv2d_Add_Scale_Sigmoid_GroupNorm.py": (
        "right", "nn.GroupNorm over the whole intermediate in PyTorch"),
    "dlblas-openevolve/answers/level2_25_Conv2d_Min_Tanh_Tanh.py": ("right", "`tl.tanh`: absent in Triton 3.9"),
    "dlblas-openevolve/answers/level2_32_Conv2d_Scaling_Min.py": (
        "right", "the scale multiply over the whole conv output in PyTorch (the min in Triton)"),
    "dlblas-openevolve/answers/level2_28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply.py": (
        "right", "InstanceNorm (each row of the Linear output as a 1 x out_features plane) in PyTorch: a "
        "normalization over the whole intermediate"),
    "dlblas-openevolve/answers/level2_30_Gemm_GroupNorm_Hardtanh.py": (
        "right", "GroupNorm and hardtanh over the whole GEMM output in PyTorch"),
    "dlblas-openevolve/answers/level2_35_Conv2d_Subtract_HardSwish_MaxPool_Mish.py": (
        "right", "MaxPool2d and mish over the intermediate in PyTorch"),
    "dlblas-openevolve/answers/level2_43_Conv3d_Max_LogSumExp_ReLU.py": (
        "right", "MaxPool3d over the whole conv output in PyTorch"),
    "dlblas-openevolve/answers/level2_52_Conv2d_Activation_BatchNorm.py": (
        "right", "BatchNorm2d (batch statistics, training mode) over the whole intermediate in PyTorch"),
    "dlblas-openevolve/answers/level2_60_ConvTranspose3d_Swish_GroupNorm_HardSwish.py": (
        "right", "nn.GroupNorm over the whole intermediate in PyTorch"),
    "dlblas-openevolve/answers/level2_65_Conv2d_AvgPool_Sigmoid_Sum.py": (
        "right", "AvgPool2d over the whole conv output in PyTorch"),
    "dlblas-openevolve/answers/level2_66_Matmul_Dropout_Mean_Softmax.py": (
        "right", "the Linear in Triton, then dropout (bernoulli_, mul, div_) and a mean over the whole matmul output "
        "in PyTorch: passes over half the input's bytes, not a finishing op (the output is identically 1: "
        "kernelagent's answer fills ones in Triton and is correct)"),
    # -- incorrect (36): is the answer wrong, or the trial unfair to it?
    "dlblas-kernelagent/answers/level1_14_Matmul_for_upper_triangular_matrices.py": (
        "right", "C = torch.empty_like(A) and only the upper triangle stored: the lower triangle is what the "
        "allocation held (NaN on the problem's own inputs)"),
    "dlblas-kernelagent/answers/level1_100_HingeLoss.py": (
        "right", "one block of next_power_of_2(n) lanes: each masked lane loads 0 and adds clamp(1 - 0) = 1 to the "
        "sum (batch 3: +1/3); right only for power-of-two batches"),
    "dlblas-kernelagent/answers/level1_23_Softmax.py": (
        "right", "masked lanes loaded as 0 are summed as exp(0 - max): wrong unless the row is a multiple of 1024 "
        "(16384 is; 31 is not)"),
    "dlblas-kernelagent/answers/level1_37_FrobeniusNorm_.py": (
        "right", "divides by the sum of squares, not its square root (`norm` is computed and never used)"),
    "dlblas-kernelagent/answers/level1_88_MinGPTNewGelu.py": (
        "right", "tanh as (1-e)/(1+e), e = exp(-2z): inf/inf = NaN for x below about -10.1 (randn*100); the Model: -0"),
    "dlblas-kernelagent/answers/level2_17_Conv2d_InstanceNorm_Divide.py": (
        "right", "the variance sums (0 - mean)^2 over the masked lanes of next_power_of_2(H*W): wrong at 30x30 as at "
        "the CPU sizes"),
    "dlblas-kernelagent/answers/level2_24_Conv3d_Min_Softmax.py": (
        "right", "BLOCK_SIZE_C = 16, the file's channel count: fewer channels leave +inf lanes, max = inf, every "
        "output NaN; more are dropped"),
    "dlblas-kernelagent/answers/level2_22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish.py": (
        "right", "logsumexp over a fixed 1024 lanes, no loop: the past-tile trial (hidden past 1024) drops columns; the "
        "message's TF32 hint is wrong (no tl.dot; the interpreter's dot is exact anyway)"),
    "dlblas-kernelagent/answers/level2_38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py": (
        "right", "softmax over next_power_of_2(C) lanes, masked lanes loaded as 0 add exp(-max): wrong unless C is a "
        "power of two (7)"),
    "dlblas-kernelagent/answers/level2_46_Conv2d_Subtract_Tanh_Subtract_AvgPool.py": (
        "right", "tanh as (e-1)/(e+1), e = exp(2x), x clamped to +-50: exp(100) overflows fp32, NaN for x > 44"),
    "dlblas-kernelagent/answers/level2_52_Conv2d_Activation_BatchNorm.py": (
        "right", "softplus as log(1+exp(x)), tanh as (e-1)/(e+1): NaN once exp overflows (x > 44, randn*100)"),
    "dlblas-kernelagent/answers/level2_55_Matmul_MaxPool_Sum_Scale.py": (
        "right", "BLOCK_SIZE_IN = 16, no loop ('next power of two >= in_features (10)'): the past-tile trial (17 "
        "features) drops one; out_features == 5 asserted"),
    "dlblas-kernelagent/answers/level2_49_ConvTranspose3d_Softmax_Sigmoid.py": (
        "right", "softmax over dim 1 taken as the innermost axis of NCDHW (`view(B*D*H*W, C)`): wrong at any size"),
    "dlblas-kernelagent/answers/level2_75_Gemm_GroupNorm_Min_BiasAdd.py": (
        "right", "BLOCK_FEATURES = 32, the full size's group: smaller groups count masked zeros in the variance and "
        "the min"),
    "dlblas-kernelagent/answers/level2_88_Gemm_GroupNorm_Swish_Multiply_Swish.py": (
        "right", "a group's lanes past group_size are masked only at the row's end: they read the next group into its "
        "statistics (groups of 5 at cpu-wide)"),
    "dlblas-kernelagent/answers/level2_86_Matmul_Divide_GELU.py": (
        "right", "x and w cast to fp16 before tl.dot: 5e-4 in an fp32 problem (the hint says TF32; the cause is the "
        "cast)"),
    "dlblas-openevolve/answers/level1_100_HingeLoss.py": (
        "right", "masked lanes (other=0) give clamp(1 - 0) = 1 each in the sum: right only for power-of-two batches; "
        "only program 0 stores (a batch over 1024 is truncated)"),
    "dlblas-openevolve/answers/level1_14_Matmul_for_upper_triangular_matrices.py": (
        "false", "right on the problem's triangular inputs (1e-8 at cpu and cpu-odd), wrong only on the randn, "
        "offset and randn*100 redraws, which are full matrices: its masks read the upper triangles the problem's "
        "get_inputs (torch.triu) and docstring promise"),
    "dlblas-openevolve/answers/level1_15_Matmul_for_lower_triangular_matrices.py": (
        "false", "right on the problem's tril inputs (2e-6 at 32x32), wrong only on the full-matrix redraws: as "
        "level1_14's"),
    "dlblas-openevolve/answers/level1_23_Softmax.py": (
        "right", "masked lanes loaded as 0 summed as exp(-max) (BLOCK 2048): wrong unless the row is a multiple"),
    "dlblas-openevolve/answers/level1_35_GroupNorm_.py": (
        "right", "the variance pass adds (0 - mean)^2 for each masked lane of the last block: wrong with a nonzero "
        "mean (offset inputs) unless a group is a multiple of 1024"),
    "dlblas-openevolve/answers/level1_24_LogSoftmax.py": (
        "right", "the sum pass loads without `other` (0 in the interpreter, undefined on a GPU) and adds exp(-max) "
        "for each masked lane: wrong unless n_cols is a power of two (65)"),
    "dlblas-openevolve/answers/level1_50_Product_reduction_over_a_dimension.py": (
        "right", "the product as exp(sum log(|x| + 1e-12)) over next_power_of_2 lanes: each masked lane (other=0) "
        "multiplies by 1e-12 (65 rows: -0)"),
    "dlblas-openevolve/answers/level1_63_conv_standard_2D__square_input__square_kernel.py": (
        "right", "input and weight cast to fp16 for tl.dot: 4e-4 in an fp32 problem (the hint says TF32)"),
    "dlblas-openevolve/answers/level2_11_ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm.py": (
        "right", "its GroupNorm tiles H and W with one 1-D mask for both axes and sums masked lanes into the variance "
        "(BatchNorm, tanh and max-pool left in PyTorch besides)"),
    "dlblas-openevolve/answers/level2_17_Conv2d_InstanceNorm_Divide.py": (
        "right", "the variance pass adds (0 - mean)^2 per masked lane (BLOCK 1024 over 900 or 64 elements): wrong "
        "with any nonzero mean"),
    "dlblas-openevolve/answers/level2_16_ConvTranspose2d_Mish_Add_Hardtanh_Scaling.py": (
        "right", "tanh(softplus) as (e-1)/(e+1), e = exp(2 softplus): NaN for x > 44 (randn*100)"),
    "dlblas-openevolve/answers/level2_22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish.py": (
        "right", "the logsumexp's sum pass loads masked lanes as 0 and adds exp(-max) for each: wrong unless hidden "
        "is a multiple of 128"),
    "dlblas-openevolve/answers/level2_36_ConvTranspose2d_Min_Sum_GELU_Add.py": (
        "right", "the output is allocated with 16 channels, the file's out_channels as a constant: wrong shape at "
        "any other size"),
    "dlblas-openevolve/answers/level2_39_Gemm_Scale_BatchNorm.py": (
        "right", "x and w cast to fp16 for the products: 6e-4 before BatchNorm (run outside the judge: 6e-4 relative "
        "at the cpu size, eager 5e-7)"),
    "dlblas-openevolve/answers/level2_27_Conv3d_HardSwish_ReLU_Softmax_Mean.py": (
        "right", "softmax over next_power_of_2(C) lanes, masked lanes (0) add exp(-max): wrong unless C is a power "
        "of two (5)"),
    "dlblas-openevolve/answers/level2_37_Matmul_Swish_Sum_GroupNorm.py": (
        "right", "reads `in_features`, the answer file's own global (512), not x's width: out-of-bounds reads at "
        "any other size (GroupNorm left in PyTorch besides)"),
    "dlblas-openevolve/answers/level2_48_Conv3d_Scaling_Tanh_Multiply_Sigmoid.py": (
        "right", "tanh as (e-1)/(e+1), e = exp(2x): NaN for x > 44 (randn*100)"),
    "dlblas-openevolve/answers/level2_64_Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU.py": (
        "right", "the sum pass loads masked lanes as 0 and adds exp(-max) for each: wrong unless out_features is a "
        "power of two (65)"),
    # -- runtime_error (20)
    "dlblas-kernelagent/answers/level1_58_conv_transposed_3D__asymmetric_input__asymmetric_kernel.py": (
        "right", "a 5-D launch grid: Triton takes at most 3 (fails on a GPU too)"),
    "dlblas-kernelagent/answers/level2_10_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh.py": (
        "cpu-mode", "`libdevice.tanh`: the interpreter's libdevice stubs return None, and tanh has no tl.math twin to "
        "run as (agent.harness.worker.interpret maps only those)"),
    "dlblas-kernelagent/answers/level2_25_Conv2d_Min_Tanh_Tanh.py": (
        "cpu-mode", "`libdevice.tanh`: a stub returning None in the interpreter (no tl.math twin)"),
    "dlblas-kernelagent/answers/level2_30_Gemm_GroupNorm_Hardtanh.py": (
        "right", "`BLOCK_SIZE_C=group_size` in tl.arange: power-of-two groups only (the GPU's odd size fails too)"),
    "dlblas-kernelagent/answers/level2_27_Conv3d_HardSwish_ReLU_Softmax_Mean.py": (
        "right", "the channel count as a tl.arange width: power-of-two channel counts only"),
    "dlblas-kernelagent/answers/level2_62_Matmul_GroupNorm_LeakyReLU_Sum.py": (
        "right", "the group size as a tl.arange width: power-of-two groups only"),
    "dlblas-kernelagent/answers/level2_6_Conv3d_Softmax_MaxPool_MaxPool.py": (
        "right", "grid N*(S+255)//256 launches programs past the last sample whose stores are masked on the spatial "
        "index only: out-of-bounds writes (the interpreter's process crashed; full size: 27 extra programs)"),
    "dlblas-kernelagent/answers/level2_7_Conv3d_ReLU_LeakyReLU_GELU_Sigmoid_BiasAdd.py": (
        "cpu-mode", "`libdevice.tanh` in its GELU: a stub returning None in the interpreter (no tl.math twin)"),
    "dlblas-kernelagent/answers/level2_94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm.py": (
        "right", "`BLOCK_SIZE=group_size` in tl.arange: power-of-two groups only"),
    "dlblas-kernelagent/answers/level2_98_Matmul_AvgPool_GELU_Scale_Max.py": (
        "right", "asserts out_features % pool_kernel_size == 0 where the Model's AvgPool1d takes any width (the "
        "GPU's odd size fails too)"),
    "dlblas-openevolve/answers/level1_18_Matmul_with_transposed_both.py": (
        "right", "passes BLOCK_SIZE_M/N/K to an autotuned kernel: Triton refuses the conflicting meta-parameters on "
        "a GPU too"),
    "dlblas-openevolve/answers/level1_53_Min_reduction_over_a_dimension.py": (
        "right", "the reduced size as a tl.arange width: power-of-two sizes only"),
    "dlblas-openevolve/answers/level1_60_conv_standard_3D__square_input__asymmetric_kernel.py": (
        "right", "a 5-D launch grid: Triton takes at most 3"),
    "dlblas-openevolve/answers/level1_64_conv_transposed_1D.py": (
        "right", "min(64, in_channels // groups) as a tl.arange width: power-of-two channel counts only"),
    "dlblas-openevolve/answers/level1_66_conv_standard_3D__asymmetric_input__asymmetric_kernel.py": (
        "right", "`dil_d` is never defined: the kernel cannot compile anywhere"),
    "dlblas-openevolve/answers/level1_7_Matmul_with_small_K_dimension_.py": (
        "right", "asserts K == 32, the file's size, where the Model takes any K (the GPU's odd size, 31, fails too)"),
    "dlblas-openevolve/answers/level2_10_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh.py": (
        "right", "min(256, H*W) as a tl.arange width: power-of-two planes only"),
    "dlblas-openevolve/answers/level2_47_Conv3d_Mish_Tanh.py": (
        "cpu-mode", "`libdevice.tanh`: a stub returning None in the interpreter (no tl.math twin)"),
    "dlblas-openevolve/answers/level2_46_Conv2d_Subtract_Tanh_Subtract_AvgPool.py": (
        "right", "`tl.libdevice.tanh`: no such module since Triton 3.0; fails on a GPU too"),
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
