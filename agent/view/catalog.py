"""Rich tables for the catalogs: GPUs, the stage ladder, the built-in problems."""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from agent.prompts import format_number
from agent.schema import GPUSpec, ProblemSpec, SizeSet, Stage

_GPU_COLUMNS = ("", "key", "name", "arch", "cc", "SMs", "GB/s", "TF32", "BF16", "FP16", "smem/SM KB", "smem/block KB",
                "L2 MB")
# Narrower consoles get fewer columns, each value whole: what a kernel's limits hang on first.
GPU_FORMS = (_GPU_COLUMNS, ("", "key", "name", "SMs", "GB/s", "FP16", "smem/SM KB", "L2 MB"),
             ("", "key", "SMs", "GB/s", "FP16", "L2 MB"))


def gpu_table(gpus: list[GPUSpec], target: str, caption: str, *, shown: tuple[str, ...] = _GPU_COLUMNS) -> Table:
    """The GPU catalog; `target` (the key --gpu auto resolves to) is starred; `shown`: its columns (GPU_FORMS)."""
    table = Table(title="GPU catalog", caption=caption)
    for col in shown:
        table.add_column(col, justify="right" if col not in ("", "key", "name", "arch") else "left",
                         no_wrap=col != "name")
    for g in gpus:
        cells = dict(zip(_GPU_COLUMNS, (
            "*" if g.key == target else "", g.key, g.name, g.architecture, g.compute_capability, str(g.sms),
            format_number(g.memory_bandwidth_gbs), format_number(g.tf32_tflops), format_number(g.bf16_tflops),
            format_number(g.fp16_tflops), str(g.smem_per_sm_kb), str(g.smem_per_block_kb), format_number(g.l2_mb))))
        table.add_row(*(cells[c] for c in shown))
    return table


def fitting(console: Console, *tables: Table) -> Table:
    """The first of `tables` (widest first) that fits the console without cutting a value, else the last."""
    for table in tables[:-1]:
        if Measurement.get(console, console.options.update_width(100_000), table).maximum <= console.width:
            return table
    return tables[-1]


def ladder_table(stages: list[Stage]) -> Table:
    table = Table(title="Stage ladder", show_lines=True)
    for col in ("#", "stage", "focus", "ncu metrics", "rules"):
        # a stage name is never folded mid-word; focus wraps at words; a metric name folds only where it must
        table.add_column(col, overflow="fold" if col == "ncu metrics" else "ellipsis", no_wrap=col in ("#", "stage"),
                         min_width=max((len(s.name) for s in stages), default=0) if col == "stage" else None)
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
        table.add_column(col, no_wrap=col == "problem")  # a name is what --problem takes: never folded
    for p in problems:
        table.add_row(p.name, p.description, sizes(p.sizes), sizes(p.cpu_sizes), "yes" if p.start else "no")
    return table


def rules_table(rules: list) -> Table:
    """`agent rules`: every rule a verdict can name, where it lives and what it refuses (agent.ruleindex)."""
    t = Table(title="rules (a refusal's message ends with its \\[id])", title_justify="left")
    for col in ("id", "room", "file", "refuses"):
        t.add_column(col, overflow="fold")
    for r in rules:
        t.add_row(r.id, r.room, r.file + (f"\n{r.data}" if r.data else ""), r.refuses)
    return t
