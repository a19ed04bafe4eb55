"""Rich renderables for ncu profiles: one report's metrics and rule results, and the diff of two."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from agent.ncu import DURATION, MetricDelta, metric_info, stage_metric_set
from agent.ncu.sass import KernelSass
from agent.schema import Profile, Stage

_DIRECTION_STYLE = {"better": "green", "worse": "red", "same": "dim", "neutral": "yellow"}


def fmt_metric(name: str, value: float | int) -> str:
    """Durations in µs, integers as integers, everything else with two decimals (as the prompt rounds)."""
    if name.startswith("gpu__time_duration"):
        return f"{value / 1e3:,.1f} µs"
    if isinstance(value, int) or float(value).is_integer() and name.startswith("launch__"):
        return f"{int(value):,}"
    return f"{value:,.2f}"


def profile_view(prof: Profile, stage: Stage) -> RenderableType:
    parts: list = [Text.from_markup(f"[bold]{prof.report or 'profile'}[/]  [dim]{prof.gpu or 'unknown GPU'}, "
                                    f"{prof.metric_set} set, stage {stage.name}[/]")]
    shown = stage_metric_set(stage)
    for name, k in prof.kernels.items():
        t = Table(title=f"[bold]{name}[/]", title_justify="left", show_header=True, header_style="bold")
        t.add_column("metric")
        t.add_column("name", style="dim")
        t.add_column("value", justify="right")
        dims = lambda d: "×".join(str(x) for x in d) if d else "—"  # noqa: E731
        t.add_row("grid × block", "launch__grid_dim / block_dim", f"{dims(k.grid)} × {dims(k.block)}")
        t.add_row("launches", "", str(k.launches))
        for metric in shown:
            value = k.metrics.get(metric)
            label = metric_info(metric).label if metric_info(metric).label != metric else ""
            text = fmt_metric(metric, value) if value is not None else "[dim]not in report[/]"
            if metric == DURATION and value is not None and k.launches > 1:
                text += f" ({fmt_metric(metric, value / k.launches)} per launch)"
            t.add_row(label, metric, text)
        parts.append(t)
        if k.rules:
            r = Table(title=f"guided analysis: {name}", title_justify="left", show_lines=True, header_style="bold")
            r.add_column("rule")
            r.add_column("kind")
            r.add_column("est. speedup", justify="right")
            r.add_column("message", ratio=1)
            for rule in k.rules:
                style = {"optimization": "yellow", "warning": "magenta", "error": "red", "ok": "green"}.get(rule.kind, "")
                speedup = f"{rule.estimated_speedup_pct:.1f} %" if rule.estimated_speedup_pct is not None else ""
                r.add_row(f"{rule.title}\n[dim]{rule.rule}[/]", Text(rule.kind, style=style), speedup, rule.message)
            parts.append(r)
    if prof.bottleneck:
        parts.append(Text.from_markup(f"[bold]bottleneck:[/] {prof.bottleneck.reason}"))
    return Group(*parts)


def diff_view(deltas: list[MetricDelta], before: Path, after: Path) -> RenderableType:
    t = Table(title=f"{before} → {after}", title_justify="left", header_style="bold")
    for col, justify in (("kernel", "left"), ("metric", "left"), ("before", "right"), ("after", "right"),
                         ("delta", "right"), ("change", "right"), ("direction", "left")):
        t.add_column(col, justify=justify)  # type: ignore[arg-type]
    for d in deltas:
        label = metric_info(d.metric).label
        fmt = lambda v: fmt_metric(d.metric, v) if v is not None else "—"  # noqa: E731
        delta = "—" if d.delta is None else ("+" if d.delta > 0 else "") + fmt(d.delta)
        pct = "—" if d.pct is None else f"{d.pct:+.1f} %"
        t.add_row(d.kernel, label if label != d.metric else d.metric, fmt(d.before), fmt(d.after), delta, pct,
                  Text(d.direction, style=_DIRECTION_STYLE[d.direction]))
    return t




def sass_view(kernels: list[KernelSass], top: int = 10) -> RenderableType:
    """Per kernel: the hottest instructions (warp samples, executed count, the stall the samples name), then the whole
    listing with ▶ on the hottest. Offsets are from the kernel's first instruction."""
    parts: list[RenderableType] = []
    for k in kernels:
        base = k.instructions[0].pc if k.instructions else 0
        total = max(k.total_samples, 1)
        hot = k.hottest(top)
        t = Table(title=f"[bold]{k.name}[/]: hottest {len(hot)} of {len(k.instructions)} instructions by warp samples",
                  title_justify="left", header_style="bold")
        for col in ("offset", "samples", "executed", "stall", "SASS"):
            t.add_column(col, justify="left" if col in ("stall", "SASS") else "right", no_wrap=col != "SASS")
        for i in hot:
            stall = max(i.stalls.items(), key=lambda x: x[1]) if i.stalls else None
            t.add_row(f"{i.pc - base:#06x}", f"{100 * i.samples / total:.1f} %", f"{i.executed:,}",
                      f"{stall[0]} {100 * stall[1] / max(i.samples, 1):.0f} %" if stall else "", Text(i.sass))
        parts.append(t)
        hot_pcs = {i.pc for i in hot}
        listing = Text()
        for i in k.instructions:
            mark = "▶" if i.pc in hot_pcs else " "
            line = f"{mark} {i.pc - base:#06x}  {i.executed:>9,}  {i.samples:>6}  {i.sass}\n"
            listing.append(line, style="bold yellow" if i.pc in hot_pcs else "")
        parts.append(Text(f"{k.name}: offset, executed, warp samples, instruction", style="dim"))
        parts.append(listing)
    return Group(*parts)
