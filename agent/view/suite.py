"""`agent eval` of several answers: one row each, then the suite's summary (agent.suite)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from agent.plural import count
from agent.view.fmt import CPU_MODE_SPEEDUP, fmt_mj, fmt_ms, fmt_x, verdict_text

if TYPE_CHECKING:
    from agent.schema import EvalResult
    from agent.suite import ClockSummary, SuiteSummary


_TEXT = ("answer", "verdict", "message")


def suite_view(files: list[Path], results: list[EvalResult], summary: SuiteSummary, problem: str, stage: str,
               objective: str) -> RenderableType:
    """A row per answer (verdict, both clocks, energy, speedups on the objective's clock, the message), then the
    summary. With the energy objective the speedups are the device clock's (as Timing's plain fields are)."""
    table = Table(box=box.SIMPLE_HEAD, title=f"{problem} · {stage} · {count(len(results), 'answer')}",
                  title_justify="left")
    objective = "device" if objective == "energy" else objective
    speedups = (f"× eager ({objective})", f"× compile ({objective})")  # the clock the speedups are on
    for col in ("answer", "verdict", "device ms", "latency ms", "energy", *speedups, "message"):
        table.add_column(col, justify="left" if col in _TEXT else "right",
                         overflow="fold" if col == "message" else "ellipsis", no_wrap=col != "message")
    for f, r in zip(files, results):
        t = r.timing
        table.add_row(f.name, verdict_text(r.verdict.value), fmt_ms(t.device_ms if t else None),
                      fmt_ms(t.latency_ms if t else None), fmt_mj(t.energy_mj if t else None),
                      fmt_x(getattr(t, f"{objective}_speedup_vs_eager") if t else None, t.meaningful if t else None),
                      fmt_x(getattr(t, f"{objective}_speedup_vs_compile") if t else None, t.meaningful if t else None),
                      "" if r.verdict.value == "correct" else r.message[:160])
    judged = summary.answers - summary.needs_gpu
    apart = f" · {summary.needs_gpu} not judged: CPU mode cannot, they need a GPU" if summary.needs_gpu else ""
    lines = [Text(f"correct: {summary.correct}/{judged} ({100 * summary.fraction_correct:.0f} %) · " +
                  ", ".join(f"{k} {v}" for k, v in sorted(summary.verdicts.items()) if k != "needs_gpu") + apart)]
    cpu = any(r.timing is not None and not r.timing.meaningful for r in results)
    if cpu:  # a fraction "faster than eager" or a geometric mean of interpreter timings would mislead
        lines.append(Text(f"speedups: {CPU_MODE_SPEEDUP}"))
    else:
        for clock, s in (("device", summary.device), ("latency", summary.latency)):
            lines.append(_clock_line(clock, s))
    unmeasured = sorted({r.timing.energy_note for r in results if r.timing is not None and r.timing.energy_mj is None})
    if unmeasured:
        lines.append(Text("energy: not measured: " + "; ".join(unmeasured), style="dim"))
    if cpu:
        lines.append(Text("CPU mode (TRITON_INTERPRET=1): these timings say nothing about a GPU", style="dim"))
    return Group(table, *lines)


def _pct(x: float | None) -> str:
    return f"{100 * x:.0f} %" if x is not None else "–"


def _clock_line(clock: str, s: ClockSummary) -> Text:
    return Text(f"{clock} clock: faster than eager {_pct(s.faster_than_eager)}, than torch.compile "
                f"{_pct(s.faster_than_compile)} of answers; geometric mean of the correct ones "
                f"{fmt_x(s.geomean_vs_eager)} eager, {fmt_x(s.geomean_vs_compile)} torch.compile")
