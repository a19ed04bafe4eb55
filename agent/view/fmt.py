"""Formatting shared by every renderable: verdict colours, times, speedups, tokens, money."""

from __future__ import annotations

from rich.text import Text

from agent.schema import Timing

VERDICT_STYLE = {
    "correct": "bold green",
    "incorrect": "yellow",
    "timeout": "magenta",
    "needs_gpu": "cyan",  # not judged (CPU mode cannot): neither correct nor a failure
}


# ---------------------------------------------------------------- formatting


def verdict_text(verdict: str) -> Text:
    return Text(str(verdict), style=VERDICT_STYLE.get(str(verdict), "red"))


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "–"
    return f"{ms:.3f} ms" if ms < 10 else f"{ms:.1f} ms"


def fmt_mj(mj: float | None) -> str:
    """Energy per call: '12.3 mJ', '456 µJ' under a millijoule, '–' where not measured (the reason goes beside)."""
    if mj is None:
        return "–"
    if mj < 1:
        return f"{mj * 1000:.0f} µJ"
    return f"{mj:.2f} mJ" if mj < 10 else f"{mj:.1f} mJ" if mj < 100 else f"{mj:,.0f} mJ"


def energy_text(t: Timing | None) -> str:
    """'energy 12.3 mJ per call (± 1.2 %)' or 'energy: not measured: <why>'."""
    if t is None:
        return "energy: not measured: no timing"
    if t.energy_mj is None:
        return f"energy: not measured: {t.energy_note or 'no reason recorded'}"
    spread = f" (spread {t.energy_spread_pct:.1f} %)" if t.energy_spread_pct is not None else ""
    return f"energy {fmt_mj(t.energy_mj)} per call{spread}"


# CPU mode's times are Triton's interpreter against eager PyTorch on the CPU: their ratio is no speedup of anything
CPU_MODE_SPEEDUP = "n/a (CPU mode)"


def fmt_x(x: float | None, meaningful: bool | None = True) -> str:
    """'1.23×'; '–' where none was measured; CPU_MODE_SPEEDUP where one was, in CPU mode (meaningful False)."""
    if x is None:
        return "–"
    return CPU_MODE_SPEEDUP if meaningful is False else f"{x:.2f}×"


def fmt_pct(p: float | None) -> str:
    return "–" if p is None else f"{p:.1f} %"


def fmt_tokens(n: int) -> str:
    return f"{n:,}" if n else "–"


def fmt_cost(usd: float | None, priced: bool = True) -> str:
    """'$0.0123'; 'unknown' (or '≥ $0.0123') where a model's price is not known: never a made-up $0."""
    if usd is None or (not priced and not usd):
        return "unknown"
    if not usd:
        return "–"
    text = f"${usd:.4f}" if usd < 1 else f"${usd:.2f}"
    return text if priced else f"≥ {text}"


def fmt_value(v: float | int) -> str:
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"


def speedup_text(x: float | None, meaningful: bool | None = True) -> Text:
    if x is None:
        return Text("–", style="dim")
    if meaningful is False:
        return Text(CPU_MODE_SPEEDUP, style="dim")
    return Text(fmt_x(x), style="green" if x > 1.0 else "red" if x < 1.0 else "")


# ---------------------------------------------------------------- tables and panels


def sci(x: float | None) -> str:
    return "–" if x is None else f"{x:.2e}"


def clocks_text(t: Timing) -> str:
    """One line: the objective's clock with its speedups, the other clock beside it, launches per forward."""
    other = "device" if t.objective == "latency" else "latency"  # energy's plain fields are the device clock's
    other_ms = t.device_ms if other == "device" else t.latency_ms
    clock = "device" if t.objective == "energy" else t.objective
    text = f"{clock} {fmt_ms(t.candidate_ms)}  " + (f"{fmt_x(t.speedup_vs_eager)} eager" if t.meaningful else
                                                   f"speedup {CPU_MODE_SPEEDUP}")
    if t.speedup_vs_compile is not None and t.meaningful:
        text += f"  {fmt_x(t.speedup_vs_compile)} compile"
    if other_ms is not None and t.meaningful:
        text += f"  ({other} {fmt_ms(other_ms)}"
        text += f", {t.launches} launch{'es' if t.launches != 1 else ''})" if t.launches is not None else ")"
    if t.energy_mj is not None:
        text += f"  {fmt_mj(t.energy_mj)}"
    return text
