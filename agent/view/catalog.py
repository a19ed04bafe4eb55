"""Rich tables for the catalogs: GPUs, the stage ladder, the built-in problems."""

from __future__ import annotations

from rich.table import Table

from agent.prompts import format_number
from agent.schema import GPUSpec, ProblemSpec, SizeSet, Stage


def gpu_table(gpus: list[GPUSpec], target: str, caption: str) -> Table:
    """The GPU catalog; `target` (the key --gpu auto resolves to) is starred."""
    table = Table(title="GPU catalog", caption=caption)
    for col in ("", "key", "name", "arch", "cc", "SMs", "GB/s", "TF32", "BF16", "FP16", "smem/SM KB", "smem/block KB",
                "L2 MB"):
        table.add_column(col, justify="right" if col not in ("", "key", "name", "arch") else "left")
    for g in gpus:
        table.add_row("*" if g.key == target else "", g.key, g.name, g.architecture, g.compute_capability,
                      str(g.sms), format_number(g.memory_bandwidth_gbs), format_number(g.tf32_tflops),
                      format_number(g.bf16_tflops), format_number(g.fp16_tflops), str(g.smem_per_sm_kb),
                      str(g.smem_per_block_kb), format_number(g.l2_mb))
    return table


def ladder_table(stages: list[Stage]) -> Table:
    table = Table(title="Stage ladder", show_lines=True)
    for col in ("#", "stage", "focus", "ncu metrics", "rules"):
        table.add_column(col, overflow="fold" if col != "stage" else "ellipsis", no_wrap=col in ("#", "stage"))
    for i, s in enumerate(stages, start=1):
        rules = [f"{k}={v}" for k, v in s.rules.model_dump().items() if v not in (None, False, "")]
        table.add_row(str(i), s.name, s.focus, "\n".join(s.metrics), "\n".join(rules) or "-")
    return table


def problem_table(problems: list[ProblemSpec]) -> Table:
    def sizes(sets: list[SizeSet]) -> str:
        return "\n".join(
            s.label + (": " + ", ".join(f"{k}={v}" for k, v in s.overrides.items()) if s.overrides else " (file's own)")
            for s in sets
        )

    table = Table(title="Problems", show_lines=True)
    for col in ("problem", "description", "GPU sizes", "CPU sizes", "start"):
        table.add_column(col)
    for p in problems:
        table.add_row(p.name, p.description, sizes(p.sizes), sizes(p.cpu_sizes), "yes" if p.start else "no")
    return table
