"""The report's charts (plotly figures), from a run's records: progress on both clocks, energy, the roofline, the
verdict mix. Builders return figures and print nothing; agent.view.report lays them out. Imported only by
`agent report` (plotly is not light)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

import plotly.graph_objects as go

from agent.diagnosis.roofline import measure
from agent.schema import Candidate, GPUSpec, Timing, Verdict

VERDICT_COLOURS = {
    "correct": "#2e9e44", "incorrect": "#e8a21a", "timeout": "#9b59b6", "rule_violation": "#d62728",
    "runtime_error": "#8c2d19", "compile_error": "#b5651d", "syntax_error": "#e377c2", "no_code": "#8c8c8c",
    "needs_gpu": "#17becf",
}
CLOCK_STYLE = {"device": "solid", "latency": "dash"}
_LAYOUT = dict(template="plotly_white", height=380, margin=dict(l=60, r=20, t=50, b=50),
               legend=dict(x=1.01, y=1, font=dict(size=11)), hovermode="closest")


@dataclass
class Point:
    """One candidate in recorded order: its position (1-based), minutes since the run started, and the run's best
    (on the run's objective) once it has been recorded."""

    n: int
    minutes: float
    candidate: Candidate
    best: Candidate | None


def points(cands: list[Candidate], chain: list[Candidate], started: datetime, by: str = "n") -> list[Point]:
    """Every candidate with the best so far, in recorded order (by='n') or in the order they were recorded in time
    (by='minutes': a round's candidates land as they finish): a best counts from its own place on (the loop names it
    after its round, from that round's candidates)."""
    minutes = {c.id: max((c.created_at - started).total_seconds(), 0.0) / 60.0 for c in cands}
    pts = [Point(n + 1, minutes[c.id], c, None) for n, c in enumerate(cands)]
    if by == "minutes":
        pts.sort(key=lambda p: (p.minutes, p.n))
    place = {p.candidate.id: i for i, p in enumerate(pts)}
    at = sorted(((place[b.id], n), b) for n, b in enumerate(chain) if b.id in place)
    best, k = None, 0
    for i, p in enumerate(pts):
        while k < len(at) and at[k][0][0] <= i:
            best = at[k][1]
            k += 1
        p.best = best
    return pts


def _t(c: Candidate | None) -> Timing | None:
    return c.result.timing if c is not None else None


def _hover(c: Candidate) -> str:
    t = c.result.timing
    figures = "" if t is None else (f"<br>device {t.device_ms or 0:.4g} ms · latency {t.latency_ms or 0:.4g} ms" +
                                    (f" · {t.energy_mj:.4g} mJ" if t.energy_mj is not None else ""))
    return f"{c.id}<br>iteration {c.iteration} · {c.stage} · {c.result.verdict}{figures}"


def progress(pts: list[Point], x: str, baselines: Timing | None, cpu: bool) -> go.Figure:
    """The run's best so far on both clocks against candidates (x='n') or wall time (x='minutes'), every correct
    candidate on each clock, eager and torch.compile as lines."""
    fig = go.Figure()
    xs = [getattr(p, x) for p in pts]
    for clock, colour in (("device", "#1f77b4"), ("latency", "#ff7f0e")):
        field = f"{clock}_ms"
        correct = [p for p in pts if p.candidate.result.verdict == Verdict.CORRECT and _t(p.candidate) is not None]
        fig.add_trace(go.Scatter(
            x=[getattr(p, x) for p in correct], y=[getattr(_t(p.candidate), field) for p in correct], mode="markers",
            name=f"candidates ({clock})", marker=dict(color=colour, size=7, opacity=0.45,
                                                      symbol="circle" if clock == "device" else "diamond"),
            text=[_hover(p.candidate) for p in correct], hovertemplate="%{text}<extra></extra>"))
        best = [getattr(_t(p.best), field) if _t(p.best) is not None else None for p in pts]
        fig.add_trace(go.Scatter(x=xs, y=best, mode="lines", line=dict(color=colour, width=3, shape="hv",
                                                                         dash=CLOCK_STYLE[clock]),
                                 name=f"best so far ({clock})", connectgaps=False,
                                 text=[p.best.id if p.best else "" for p in pts],
                                 hovertemplate=f"best so far ({clock}): %{{y:.4g}} ms<br>%{{text}}<extra></extra>"))
        for name, ms, dash in (("eager", _base(baselines, "eager", clock), "dot"),
                               ("torch.compile", _base(baselines, "compile", clock), "dashdot")):
            if ms is not None:
                fig.add_trace(_level(xs, ms, f"{name} ({clock}) {ms:.4g} ms", colour, dash))
    title = "best so far against " + ("candidates" if x == "n" else "wall time")
    if cpu:
        title += " · CPU mode: interpreter timings, not a GPU's"
    fig.update_layout(title=title, **_LAYOUT)
    fig.update_xaxes(title="candidate (recorded order)" if x == "n" else "minutes since the run started")
    fig.update_yaxes(title="ms per forward (log)", type="log")
    return fig


def _level(xs: list[float], y: float, name: str, colour: str, dash: str) -> go.Scatter:
    """A baseline as a horizontal line across the chart, named in the legend (a shape's annotation is placed in
    log10 units on a log axis: a trace is not)."""
    lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    return go.Scatter(x=[lo, hi], y=[y, y], mode="lines", name=name, line=dict(color=colour, dash=dash, width=1.5),
                      hovertemplate=f"{name}<extra></extra>")


def _base(t: Timing | None, which: str, clock: str) -> float | None:
    return getattr(t, f"{which}_{clock}_ms") if t is not None else None


def _mj(c: Candidate | None) -> tuple[float, float] | None:
    """(mJ per call, its spread in mJ) where energy was measured."""
    t = _t(c)
    if t is None or t.energy_mj is None:
        return None
    return t.energy_mj, (t.energy_spread_pct or 0.0) / 100 * t.energy_mj


def energy(pts: list[Point], baselines: Timing | None) -> go.Figure:
    """Energy per call: every correct candidate where it was measured, the best's, eager's and torch.compile's."""
    fig = go.Figure()
    measured = [(p, mj) for p in pts if p.candidate.result.verdict == Verdict.CORRECT and (mj := _mj(p.candidate))]
    fig.add_trace(go.Scatter(
        x=[p.n for p, _ in measured], y=[mj[0] for _, mj in measured], mode="markers", name="candidates",
        marker=dict(color="#2ca02c", size=8, opacity=0.6),
        error_y=dict(type="data", array=[mj[1] for _, mj in measured], visible=True),
        text=[_hover(p.candidate) for p, _ in measured], hovertemplate="%{text}<extra></extra>"))
    best = [_mj(p.best) for p in pts]
    fig.add_trace(go.Scatter(
        x=[p.n for p in pts], y=[b[0] if b else None for b in best], mode="lines",
        line=dict(color="#2ca02c", width=3, shape="hv"), name="the run's best",
        hovertemplate="the run's best: %{y:.4g} mJ<extra></extra>"))
    for name, base, dash in (("eager", baselines.eager_energy_mj if baselines else None, "dot"),
                             ("torch.compile", baselines.compile_energy_mj if baselines else None, "dashdot")):
        if base is not None:
            fig.add_trace(_level([float(p.n) for p in pts], base, f"{name} {base:.4g} mJ", "#555", dash))
    fig.update_layout(title="GPU energy per call (NVML, calls queued back to back; bars: spread over blocks)",
                      **_LAYOUT)
    fig.update_xaxes(title="candidate (recorded order)")
    fig.update_yaxes(title="mJ per call (log)", type="log")
    return fig


@dataclass
class Placed:
    candidate: str
    kernel: str
    intensity: float  # FLOP per DRAM byte
    gflops: float
    gbs: float
    roof_pct: float  # of the roofline's bound at this intensity (the profile's own peaks)


def place(cands: list[Candidate], gpu: GPUSpec | None) -> tuple[list[Placed], list[str]]:
    """Every profiled candidate's kernels on the roofline; and, in words, the profiles that cannot be placed."""
    placed: list[Placed] = []
    missing: list[str] = []
    for c in cands:
        if c.profile is None or not c.profile.kernels:
            continue
        for k in c.profile.kernels.values():
            r = measure(k, gpu)
            if r is None:
                missing.append(f"{c.id}: kernel {k.name}: its profile lacks the FLOP or DRAM byte counters "
                               "(a stage-set report); not placed")
            elif r.flops <= 0:
                missing.append(f"{c.id}: kernel {k.name}: no floating-point operation counted; not placed on a "
                               "log axis")
            else:
                placed.append(Placed(c.id, k.name, r.intensity, r.flops / r.seconds / 1e9,
                                     r.dram_bytes / r.seconds / 1e9, 100 * r.roof_s / r.seconds))
    return placed, missing


def roofline(gpu: GPUSpec | None, placed: list[Placed]) -> go.Figure:
    """The GPU's roofline from the catalog (FP32 peak, DRAM bandwidth), log-log, and the placed kernels."""
    fig = go.Figure()
    xs = [10 ** (e / 20) for e in range(-40, 61)]  # 0.01 .. 1,000 FLOP per byte
    if gpu is not None:
        peak, bw = gpu.fp32_tflops * 1e3, float(gpu.memory_bandwidth_gbs)  # GFLOP/s, GB/s
        fig.add_trace(go.Scatter(x=xs, y=[min(peak, x * bw) for x in xs], mode="lines", name=f"{gpu.name} roof",
                                 line=dict(color="#333", width=2),
                                 hovertemplate="%{x:.3g} FLOP/byte: at most %{y:,.0f} GFLOP/s<extra></extra>"))
        ridge = peak / bw
        fig.add_trace(go.Scatter(x=[ridge, ridge], y=[peak / 1e4, peak], mode="lines", name=f"ridge {ridge:.1f} "
                                 "FLOP/byte", line=dict(color="#999", dash="dot"), hoverinfo="skip"))
    by_candidate: dict[str, list[Placed]] = {}
    for p in placed:
        by_candidate.setdefault(p.candidate, []).append(p)
    for cid, ps in by_candidate.items():
        fig.add_trace(go.Scatter(
            x=[p.intensity for p in ps], y=[p.gflops for p in ps], mode="markers+text", name=cid,
            text=[p.kernel[:24] for p in ps], textposition="top center", marker=dict(size=11),
            customdata=[[p.kernel, p.gbs, p.roof_pct] for p in ps],
            hovertemplate=(f"{cid}<br>%{{customdata[0]}}<br>%{{x:.3g}} FLOP/byte · %{{y:,.1f}} GFLOP/s · "
                           "%{customdata[1]:,.0f} GB/s<br>%{customdata[2]:.0f} % of its roofline bound"
                           "<extra></extra>")))
    name = gpu.name if gpu is not None else "unknown GPU"
    fig.update_layout(title=f"roofline of the {name} (FP32, DRAM) with every profiled kernel", **_LAYOUT)
    fig.update_xaxes(title="arithmetic intensity (FLOP per DRAM byte, log)", type="log")
    fig.update_yaxes(title="GFLOP/s (log)", type="log")
    return fig


def verdicts(cands: list[Candidate]) -> go.Figure:
    """The verdict mix of each iteration, stacked; hovering a failure's bar lists its candidates and messages."""
    iterations = sorted({c.iteration for c in cands})
    stage = {c.iteration: c.stage for c in cands}
    labels = [f"i{i} {stage[i]}" for i in iterations]
    fig = go.Figure()
    counts = Counter((c.iteration, str(c.result.verdict)) for c in cands)
    for v in Verdict:
        ys = [counts.get((i, str(v)), 0) for i in iterations]
        if not any(ys):
            continue
        hover = []
        for i in iterations:
            these = [c for c in cands if c.iteration == i and c.result.verdict == v]
            lines = [f"{c.id.rsplit('-', 2)[-2]}-{c.id.rsplit('-', 1)[-1]}: {first_line(c.result.message)[:140]}"
                     for c in these] if v != Verdict.CORRECT else [c.id.rsplit("-", 1)[-1] for c in these]
            hover.append("<br>".join(lines))
        fig.add_trace(go.Bar(x=labels, y=ys, name=str(v), marker_color=VERDICT_COLOURS.get(str(v), "#777"),
                             text=hover, hovertemplate=f"{v}: %{{y}}<br>%{{text}}<extra></extra>",
                             textposition="none"))
    fig.update_layout(title="verdicts per iteration (hover a bar for its candidates and messages)", barmode="stack",
                      **_LAYOUT)
    fig.update_xaxes(title="iteration and its stage")
    fig.update_yaxes(title="candidates", dtick=1)
    return fig


def first_line(message: str) -> str:
    lines = (message or "").strip().splitlines()
    return lines[0] if lines else ""
