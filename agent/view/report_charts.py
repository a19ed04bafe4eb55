"""The report's charts (plotly figures), from a run's records: progress on both clocks, energy, the roofline, the
verdict mix. Builders return figures and print nothing; agent.view.report lays them out. Imported only by
`agent report` (plotly is not light)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

import plotly.graph_objects as go

from agent.diagnosis.roofline import measure
from agent.printable import printable
from agent.schema import Candidate, GPUSpec, Timing, Verdict
from agent.view.runs import short_candidate_id

VERDICT_COLOURS = {
    "correct": "#2e9e44", "incorrect": "#e8a21a", "timeout": "#9b59b6", "rule_violation": "#d62728",
    "runtime_error": "#8c2d19", "compile_error": "#b5651d", "syntax_error": "#e377c2", "no_code": "#8c8c8c",
    "needs_gpu": "#17becf",
}
CLOCK_STYLE = {"device": "solid", "latency": "dash"}
ROOFLINE_HEIGHT = 520  # px: a run's kernels sit close together; the room spreads them (and their numbers) apart
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


def tick_label(v: float) -> str:
    """A log axis's tick as the number it stands for: '0.2', '5', '20k', '1.5M' (plotly's own minor labels say '2'
    for 0.2 and 20 alike)."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= size:
            return f"{float(f'{v / size:.3g}'):g}{suffix}"
    return f"{float(f'{v:.3g}'):g}"


# Mantissas a log axis may label between powers of ten, roundest first: each is taken where it keeps a label's room
# from those already taken, so a wide range gets 1-2-5 (or 1-3, or powers alone) and a narrow one 1.2, 1.4, 1.6.
_MANTISSAS = (2, 5, 3, 1.5, 4, 6, 8, 2.5, 1.2, 7, 9, 1.4, 1.6, 1.8, 3.5, 4.5, 1.1, 1.3, 1.7, 1.9, 2.2, 2.4, 2.6, 2.8)


def log_ticks(values: list[float], px: float, slot: float) -> list[float]:
    """Tick values for a log axis `px` pixels long spanning `values`, a label needing `slot` pixels: powers of ten
    (every other one where a decade is too short for a label), then round values between them while they fit."""
    vs = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vs:
        return []
    a, b = math.log10(min(vs)), math.log10(max(vs))
    gap = slot * (b - a + 0.1) / px  # a label's room, in decades (plotly pads the range a little)
    lo, hi = a - 0.04 * (b - a) - 0.01, b + 0.04 * (b - a) + 0.01
    every = max(1, math.ceil(gap - 1e-9))
    chosen = [float(e) for e in range(math.floor(lo), math.ceil(hi) + 1) if e % every == 0 and lo <= e <= hi]
    for m in _MANTISSAS:
        for e in range(math.floor(lo) - 1, math.ceil(hi) + 1):
            v = math.log10(m) + e
            if lo <= v <= hi and all(abs(v - c) >= gap for c in chosen):
                chosen.append(v)
    ticks = {float(f"{10 ** c:.6g}") for c in chosen}
    if len(ticks) < 2:  # a range too narrow for round values: its own ends, to three figures
        ticks |= {float(f"{min(vs):.3g}"), float(f"{max(vs):.3g}")}
    return sorted(ticks)


def label_log_axes(fig: go.Figure, x_px: float = 860, y_px: float = 280) -> go.Figure:
    """Every log axis of `fig` labelled with whole numbers (tick_label) at ticks chosen from its traces' data."""
    for axis, px, slot in (("x", x_px, 44.0), ("y", y_px, 24.0)):
        layout_axis = fig.layout.xaxis if axis == "x" else fig.layout.yaxis
        if layout_axis.type != "log":
            continue
        values = [float(v) for tr in fig.data for v in (getattr(tr, axis) or ()) if isinstance(v, (int, float))]
        ticks = log_ticks(values, px, slot)
        if ticks:
            layout_axis.update(tickmode="array", tickvals=ticks, ticktext=[tick_label(v) for v in ticks])
    return fig


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
    return label_log_axes(fig)


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
    return label_log_axes(fig)


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


def roofline(gpu: GPUSpec | None, placed: list[Placed], best: str | None = None) -> go.Figure:
    """The GPU's roofline from the catalog (FP32 peak, DRAM bandwidth), log-log, and the placed kernels, each marked
    by its number in the table below the chart (a kernel's name is in its hover): names beside points pile up where
    kernels sit close, as a run's variants of one kernel do. The run's best's kernels are stars."""
    fig = go.Figure()
    x_range = (min([-2.0, *(math.floor(math.log10(p.intensity / 2)) for p in placed)]),
               max([3.0, *(math.ceil(math.log10(p.intensity * 2)) for p in placed)]))  # 0.01 .. 1,000 at least
    xs = [10 ** (e / 20) for e in range(int(x_range[0] * 20), int(x_range[1] * 20) + 1)]
    ys: list[float] = [p.gflops for p in placed]
    if gpu is not None:
        peak, bw = gpu.fp32_tflops * 1e3, float(gpu.memory_bandwidth_gbs)  # GFLOP/s, GB/s
        roof = [min(peak, x * bw) for x in xs]
        ys += roof
        fig.add_trace(go.Scatter(x=xs, y=roof, mode="lines", name=f"{gpu.name} roof",
                                 line=dict(color="#333", width=2),
                                 hovertemplate="%{x:.3g} FLOP/byte: at most %{y:,.0f} GFLOP/s<extra></extra>"))
        ridge = peak / bw
        fig.add_trace(go.Scatter(x=[ridge, ridge], y=[min(ys), peak], mode="lines", name=f"ridge {ridge:.1f} "
                                 "FLOP/byte", line=dict(color="#999", dash="dot"), hoverinfo="skip"))
    y_range = (math.log10(min(ys) / 2), math.log10(max(ys) * 2)) if ys else (0.0, 5.0)
    spots = label_spots([(p.intensity, p.gflops) for p in placed], x_range, y_range, (860, ROOFLINE_HEIGHT - 100))
    by_candidate: dict[str, list[tuple[int, Placed]]] = {}
    for n, p in enumerate(placed, start=1):
        by_candidate.setdefault(p.candidate, []).append((n, p))
    for cid, ps in sorted(by_candidate.items(), key=lambda kv: kv[0] == best):  # the best's star drawn on top
        name = short_candidate_id(cid, cid.rsplit("-", 2)[0]) + (" ★ the best" if cid == best else "")
        fig.add_trace(go.Scatter(
            x=[p.intensity for _, p in ps], y=[p.gflops for _, p in ps], mode="markers+text", name=name,
            text=[str(n) for n, _ in ps], textposition=[spots[n - 1] for n, _ in ps],
            textfont=dict(size=11, color="#222"),
            marker=dict(size=15 if cid == best else 10, symbol="star" if cid == best else "circle",
                        line=dict(width=1, color="#fff")),
            customdata=[[n, p.kernel, p.gbs, p.roof_pct] for n, p in ps],
            hovertemplate=(f"#%{{customdata[0]}} · {cid}<br>%{{customdata[1]}}<br>%{{x:.3g}} FLOP/byte · "
                           "%{y:,.1f} GFLOP/s · %{customdata[2]:,.0f} GB/s<br>%{customdata[3]:.0f} % of its "
                           "roofline bound<extra></extra>")))
    name = gpu.name if gpu is not None else "unknown GPU"
    fig.update_layout(title=f"roofline of the {name} (FP32, DRAM) with every profiled kernel, numbered as in the "
                            "table below", **_LAYOUT)
    if placed:
        fig.update_layout(height=ROOFLINE_HEIGHT)
    fig.update_xaxes(title="arithmetic intensity (FLOP per DRAM byte, log)", type="log", range=list(x_range))
    fig.update_yaxes(title="GFLOP/s (log)", type="log", range=list(y_range))
    return label_log_axes(fig, y_px=ROOFLINE_HEIGHT - 100 if placed else 280)


# Where a point's label may go (plotly's textposition), as offsets of the label's centre from the point in units of
# (marker radius + half the label's width, marker radius + half its height); tried in this order.
_SPOTS = {"top center": (0, -1), "bottom center": (0, 1), "middle right": (1, 0), "middle left": (-1, 0),
          "top right": (0.8, -0.8), "top left": (-0.8, -0.8), "bottom right": (0.8, 0.8), "bottom left": (-0.8, 0.8)}


def label_spots(points: list[tuple[float, float]], x_range: tuple[float, float], y_range: tuple[float, float],
                px: tuple[float, float] = (860, 280)) -> list[str]:
    """For each point of a log-log chart, the side its short label goes on so that it covers no other label and no
    other point where a side is free (else the side that covers least): greedy, in the order given."""
    def at(x: float, y: float) -> tuple[float, float]:
        return ((math.log10(x) - x_range[0]) / (x_range[1] - x_range[0]) * px[0],
                (y_range[1] - math.log10(y)) / (y_range[1] - y_range[0]) * px[1])

    centres = [at(max(x, 1e-12), max(y, 1e-12)) for x, y in points]
    boxes = [(cx - 8, cy - 8, cx + 8, cy + 8) for cx, cy in centres]  # the markers (the best's star the largest)
    out: list[str] = []
    for n, (cx, cy) in enumerate(centres, start=1):
        w, h = 7 * len(str(n)) + 2, 13
        best_spot, best_cover = "top center", math.inf
        for spot, (dx, dy) in _SPOTS.items():
            mx, my = cx + dx * (6 + w / 2 + 1), cy + dy * (6 + h / 2)
            box = (mx - w / 2, my - h / 2, mx + w / 2, my + h / 2)
            cover = sum(_overlap(box, b) for i, b in enumerate(boxes) if i != n - 1)
            if cover < best_cover:
                best_spot, best_cover = spot, cover
            if cover == 0:
                break
        dx, dy = _SPOTS[best_spot]
        mx, my = cx + dx * (6 + w / 2 + 1), cy + dy * (6 + h / 2)
        boxes.append((mx - w / 2, my - h / 2, mx + w / 2, my + h / 2))
        out.append(best_spot)
    return out


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def verdicts(cands: list[Candidate], cut: int | None = None) -> go.Figure:
    """The verdict mix of each iteration, stacked, with a legend of the verdicts' colours (also where only one
    verdict occurs); i0 is the starting kernel's judgement, `cut` the iteration a stop cut short. Hovering a bar
    lists its candidates and their messages."""
    iterations = sorted({c.iteration for c in cands})
    stage = {c.iteration: c.stage for c in cands}
    labels = [f"i{i} " + ("start" if i == 0 else stage[i]) + (" (cut short)" if i == cut else "") for i in iterations]
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
    fig.update_layout(showlegend=True, legend_title_text="verdict")  # one verdict alone gets its key too
    fig.update_xaxes(title="iteration and its stage (i0: the starting kernel, judged before any proposal)")
    fig.update_yaxes(title="candidates", dtick=1)
    return fig


def first_line(message: str) -> str:
    """The message's first line, control characters escaped (a stored message may predate agent.printable)."""
    lines = (message or "").strip().splitlines()
    return printable(lines[0]) if lines else ""
