"""`agent report`: one run as one self-contained HTML page (plotly's JavaScript inlined: it opens offline, from a
file, with no server). What it shows, top to bottom: for a run that did not finish, why it stopped and the command
that resumes it; in short, the best against torch.compile and eager on each clock, in words
(agent.view.report_summary); the run at a glance (configuration, GPU, versions, tokens and cost); the best so far
against candidates and against wall time on both clocks, with eager and torch.compile; energy per call (or why it
was not measured); the roofline of the GPU with every profiled kernel (or why one cannot be placed); the verdicts of
each iteration and every failure's message; each new best, with what changed in its metrics (the most-moved with
units, the rest folded: agent.view.report_metrics) and in its code (side by side); the stage path and why each stage
was chosen.

`report_input` reads a run from the store; `render_report` turns it into the page (jinja2:
agent/data/report/run.html.j2; the charts: agent.view.report_charts).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent.catalog import find_gpu
from agent.harness.settings import settings
from agent.ncu import diff as metrics_diff
from agent.printable import printable
from agent.runconfig import AUTO
from agent.schema import Candidate, GPUSpec, Timing, Verdict
from agent.store import IterationRecord, RunRecord
from agent.view.fmt import energy_text, fmt_cost, fmt_mj, fmt_ms, fmt_tokens, fmt_x
from agent.view.report_metrics import metric_rows
from agent.view.report_summary import cut_short, iterations_text, standing, stopped
from agent.view.runs import short_candidate_id

# A code change this small (lines in + out) is shown open; a larger one, a rewrite, is folded behind its line counts.
CODE_DIFF_OPEN = 40
# Charts are drawn by plotly.js in the page; these are the ids a test (or a reader's browser) finds them by.
CHART_IDS = ("chart-progress-candidates", "chart-progress-time", "chart-energy", "chart-roofline", "chart-verdicts")


@dataclass
class ReportInput:
    """Everything the page shows, as the store recorded it."""

    run: RunRecord
    candidates: list[Candidate]
    iterations: list[IterationRecord]
    versions: dict[str, str] = field(default_factory=dict)
    gpu: GPUSpec | None = None
    root: Path | None = None  # the store it was read from: where `agent run --resume` must look


def report_input(store: Any, run_id: str) -> ReportInput:
    """The run `run_id` (a unique prefix or its tag is enough) from `store` (agent.store.Store), read-only."""
    run = store.get_run(run_id)
    return ReportInput(run=run, candidates=store.candidates(run.id), iterations=store.iterations(run.id),
                       versions=store.run_versions(run.id), gpu=find_gpu(run.gpu), root=store.root)


def best_chain(data: ReportInput) -> list[Candidate]:
    """The run's bests in the order they became the best: each iteration's best_before, then the run's best."""
    by_id = {c.id: c for c in data.candidates}
    ids: list[str] = []
    for it in data.iterations:
        if it.best_before and it.best_before not in ids:
            ids.append(it.best_before)
    if data.run.best and data.run.best not in ids:
        ids.append(data.run.best)
    return [by_id[i] for i in ids if i in by_id]


def render_report(data: ReportInput, now: datetime | None = None) -> str:
    """The page, as one string of HTML."""
    import plotly.offline
    from jinja2 import Environment, FileSystemLoader, select_autoescape
    from markupsafe import Markup

    from agent.datafiles import data_file
    from agent.view import report_charts as charts

    run, cands = data.run, data.candidates
    chain = best_chain(data)
    pts = charts.points(cands, chain, run.started_at)
    in_time = charts.points(cands, chain, run.started_at, by="minutes")
    timed = [c.result.timing for c in cands if c.result.timing is not None]
    baselines = next((t for t in reversed(timed) if t.eager_device_ms is not None or t.eager_ms is not None), None)
    cpu = any(not t.meaningful for t in timed)

    figures: dict[str, Any] = {
        "chart-progress-candidates": charts.progress(pts, "n", baselines, cpu),
        "chart-progress-time": charts.progress(in_time, "minutes", baselines, cpu),
    }
    measured = [t for t in timed if t.energy_mj is not None]
    if measured:
        figures["chart-energy"] = charts.energy(pts, baselines)
    placed, unplaced = charts.place(cands, data.gpu)
    figures["chart-roofline"] = charts.roofline(data.gpu, placed, run.best)
    figures["chart-verdicts"] = charts.verdicts(cands, cut_short(run, data.iterations))
    config = {"displaylogo": False, "responsive": True}
    html = {k: Markup(f.to_html(full_html=False, include_plotlyjs=False, div_id=k, config=config))
            for k, f in figures.items()}

    # every text the page shows may be candidate text (code, messages, ideas): escaped as a terminal view is
    # (agent.printable), so the page is safe to `cat`; markup the report built itself (charts, code diff) is not text
    env = Environment(loader=FileSystemLoader(str(data_file("report"))), autoescape=select_autoescape(["j2"]),
                      trim_blocks=True, lstrip_blocks=True,
                      finalize=lambda v: printable(v) if type(v) is str else v)
    return env.get_template("run.html.j2").render(
        run=run, plotly_js=Markup(plotly.offline.get_plotlyjs()), charts=html,
        energy_note=None if measured else _energy_notes(timed),
        roofline_note=_roofline_note(cands, placed, unplaced, data.gpu, run),
        unplaced=unplaced, placed=placed, short=lambda cid: short_candidate_id(cid, run.id),
        summary=standing(chain[-1] if chain else None, baselines, run.config.objective),
        stopped=stopped(run, data.iterations, cands, data.root),
        facts=_facts(data, chain), bests=[_best_section(chain, i) for i in range(len(chain))],
        failures=_failures(cands), stages=_stages(data.iterations), stage_path=_stage_path(data.iterations),
        config=_config(data), gpu=data.gpu, versions=data.versions, cpu=cpu,
        generated=(now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC"),
        markup=Markup,
    )


def _energy_notes(timed: list[Timing]) -> str:
    reasons = sorted({t.energy_note or "no reason recorded" for t in timed})
    return "energy: not measured: " + ("; ".join(reasons) if reasons else "no candidate was timed")


def _roofline_note(cands: list[Candidate], placed: list, unplaced: list[str], gpu: GPUSpec | None,
                   run: RunRecord) -> str:
    notes = []
    if gpu is None:
        notes.append(f"the GPU {run.gpu!r} is not in the catalog (agent gpus): no roof is drawn")
    profiled = [c for c in cands if c.profile is not None and c.profile.kernels]
    if not profiled:
        notes.append("no candidate of this run was profiled" + (" (CPU mode takes no ncu profile)"
                                                                 if run.device == "cpu" else ""))
    elif not placed:
        notes.append("no profiled kernel could be placed: see below")
    return "; ".join(notes)


def _duration(run: RunRecord) -> str:
    end = run.finished_at or datetime.now(timezone.utc)
    s = int(max((end - run.started_at).total_seconds(), 0))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _facts(data: ReportInput, chain: list[Candidate]) -> list[tuple[str, str]]:
    run = data.run
    u = run.usage
    best = chain[-1] if chain else None
    t = best.result.timing if best else None
    facts = [("status", run.status), ("problem", run.config.problem),
             ("stage", run.config.stage + (" (the ladder, by bottleneck)" if run.config.stage == AUTO else "")),
             ("GPU", f"{run.gpu} ({run.device})"), ("objective", run.config.objective),
             ("numerics", _numerics(run.config.precision)),
             ("proposer", run.config.llm + (f" ({run.config.model})" if run.config.llm == "openai" else "")),
             ("iterations", iterations_text(run, data.iterations, data.candidates)),
             ("started", run.started_at.strftime("%Y-%m-%d %H:%M:%S UTC")), ("duration", _duration(run)),
             ("tokens", fmt_tokens(u.prompt_tokens + u.completion_tokens) + f" ({fmt_tokens(u.prompt_tokens)} in, "
                        f"{fmt_tokens(u.completion_tokens)} out)"),
             ("cost", fmt_cost(u.cost_usd, u.priced))]
    if best is not None:
        facts.append(("best", best.id))
    if t is not None:
        speedups = (f"{fmt_x(t.speedup_vs_eager)} eager, {fmt_x(t.speedup_vs_compile)} torch.compile "
                    f"({'device' if t.objective == 'energy' else t.objective})" if t.meaningful
                    else "speedups n/a (CPU mode)")
        facts.append(("best's clocks", f"device {fmt_ms(t.device_ms)}, latency {fmt_ms(t.latency_ms)}; {speedups}"))
        facts.append(("best's energy", energy_text(t)))
    return facts


def _numerics(precision: str) -> str:
    v = settings().validation
    return {"tf32": f"tf32 (tolerance floor {v.tf32_tolerance_floor:g})",
            "kernelbench": f"kernelbench (KernelBench's check: atol = rtol = {v.kernelbench_tolerance:g})"}.get(
        precision, precision)


def _config(data: ReportInput) -> list[tuple[str, str]]:
    cfg = data.run.config.model_dump(mode="json")
    return [(k, "–" if v is None else str(v)) for k, v in cfg.items()]


def _clock_change(before: Timing | None, after: Timing | None) -> list[tuple[str, str, str, str]]:
    """(what, before, after, change) for both clocks and energy."""
    rows = []
    for label, name, fmt in (("device", "device_ms", fmt_ms), ("latency", "latency_ms", fmt_ms),
                             ("energy per call", "energy_mj", fmt_mj)):
        a = getattr(before, name) if before else None
        b = getattr(after, name) if after else None
        change = f"{(b - a) / a * 100:+.1f} %" if a and b else ""
        rows.append((label, fmt(a) if before else "", fmt(b), change))
    return rows


def _best_section(chain: list[Candidate], i: int) -> dict[str, Any]:
    """One new best: its clocks before and after, what changed in its metrics (with directions) and in its code."""
    cur, prev = chain[i], chain[i - 1] if i > 0 else None
    out: dict[str, Any] = {"candidate": cur, "previous": prev, "clocks": _clock_change(
        prev.result.timing if prev else None, cur.result.timing)}
    out["metrics"], out["metrics_rest"] = [], []
    if prev is None:
        out["metrics_note"] = "the run's first best: nothing to compare with"
    elif prev.profile is None or cur.profile is None:
        which = " and ".join(c.id for c in (prev, cur) if c.profile is None)
        out["metrics_note"] = f"no ncu profile of {which}: no metrics to compare"
    else:
        out["metrics"], out["metrics_rest"], out["metrics_note"] = metric_rows(metrics_diff(prev.profile, cur.profile))
    if prev is not None and prev.code is not None and cur.code is not None:
        a, b = printable(prev.code).splitlines(), printable(cur.code).splitlines()
        out["code_diff"] = difflib.HtmlDiff(wrapcolumn=72).make_table(
            a, b, short_candidate_id(prev.id, prev.run_id), short_candidate_id(cur.id, cur.run_id), context=True,
            numlines=3)
        ops = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
        added, removed = sum(j2 - j1 for _, _, _, j1, j2 in ops), sum(i2 - i1 for _, i1, i2, _, _ in ops)
        out["code_summary"] = f"{added} lines in, {removed} out, in {len(ops)} place{'s' if len(ops) != 1 else ''}"
        out["code_open"] = added + removed <= CODE_DIFF_OPEN
    out["code"] = cur.code or ""
    return out


def _failures(cands: list[Candidate]) -> list[dict[str, str]]:
    from agent.view.report_charts import first_line

    return [{"id": c.id, "iteration": str(c.iteration), "stage": c.stage, "verdict": str(c.result.verdict),
             "message": first_line(c.result.message), "full": c.result.message}
            for c in cands if c.result.verdict.failed]


def _stages(iterations: list[IterationRecord]) -> list[dict[str, Any]]:
    rows, last = [], None
    for it in iterations:
        rows.append({"iteration": it.iteration, "attempt": it.attempt, "stage": it.stage, "reason": it.reason,
                     "changed": last is not None and it.stage != last, "best_before": it.best_before or "–"})
        last = it.stage
    return rows


def _stage_path(iterations: list[IterationRecord]) -> list[dict[str, Any]]:
    """The stages in the order the run visited them, each with the iteration it began at and why."""
    path: list[dict[str, Any]] = []
    for it in iterations:
        if not path or path[-1]["stage"] != it.stage:
            path.append({"stage": it.stage, "from": it.iteration, "reason": it.reason})
    return path
