"""Rich renderables for runs, candidates and evaluations. Builders return renderables and print nothing."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from agent.plural import count
from agent.view.fmt import (
    energy_text,
    fmt_cost,
    fmt_mj,
    fmt_ms,
    fmt_pct,
    fmt_tokens,
    fmt_value,
    sci,
    speedup_text,
    verdict_text,
)

if TYPE_CHECKING:  # the store pulls in sqlite and pydantic models; the view only needs their shapes
    from agent.schema import Candidate, EvalResult
    from agent.store import LeaderRow, RunRecord


def leaderboard_table(rows: list[LeaderRow], title: str | None = "Leaderboard", *, compact: bool = False,
                      minimal: bool = False, why: bool = True) -> Table:
    """Rank (within a problem and device), candidate (★ the run's own best; its id holds the iteration), its parent
    (the candidate it started from, where one was recorded), run, problem, stage, verdict, time, energy per call,
    speedups, DRAM %, tokens, cost, and why a failed one failed. Where energy was not measured the caption says why.
    Over 80 lines: one column list and one row builder that must agree, column by column, in the three forms.

    compact (narrow terminals): no run or tokens column (a candidate id holds the run), ids
    shortened to the run's random tag plus the candidate part ('3fa2-i3-c1', which `agent show` accepts), shorter
    headers, the problem only when there are several, cost only when something was spent. minimal (narrower still):
    compact without DRAM and cost.
    """
    compact = compact or minimal
    full = not compact
    spent = full or (not minimal and any(r.cost_usd is None or r.cost_usd for r in rows))
    problems = full or len({r.problem for r in rows}) > 1
    ids = sorted((short_candidate_id(r.candidate, r.run) if compact else r.candidate for r in rows), key=len,
                 reverse=True)
    failed = why and any(r.message is not None for r in rows)
    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    objectives = {r.objective for r in rows if r.objective}
    mark = {c: " ◆" if objectives == {c} else "" for c in ("device", "latency")}
    parents = any(r.parent for r in rows)
    columns = [("#", "#", True), ("candidate", "candidate", True), ("parent", "", full and parents), ("run", "", full),
               ("problem", "problem", problems),
               ("stage", "stage", True),
               ("verdict", "verdict", True), ("time", "time", compact),
               (f"device{mark['device']}", "", full), (f"latency{mark['latency']}", "", full), ("launches", "", full),
               (f"energy{' ◆' if objectives == {'energy'} else ''}", "", full),
               ("vs eager", "×eager", True), ("vs compile", "×compile", True), ("DRAM", "DRAM", not minimal),
               ("tokens", "", full), ("cost", "cost", spent), ("why", "why", failed)]
    for name, short, shown in columns:
        if shown:
            text = name in ("candidate", "run", "problem", "stage", "verdict", "why")
            # Only the words of `why` wrap; an id is never cut (`agent show` takes what the table shows), and a
            # problem or stage name is shortened with an ellipsis rather than folded mid-word.
            table.add_column(name if full else short, justify="left" if text else "right",
                             no_wrap=name != "why", overflow="ellipsis", max_width=40 if name == "why" else None,
                             min_width=len(ids[0]) if name == "candidate" and ids else None)
    any_cpu = False
    for r in rows:
        cpu = r.meaningful is False
        any_cpu |= cpu
        label = Text(short_candidate_id(r.candidate, r.run) if compact else r.candidate)
        if r.run_best:
            label.append(" ★", style="bold green")
        cells: list[RenderableType] = [str(r.rank) if r.rank is not None else "–", label]
        if full and parents:  # within its run: 'i1-c2' (the candidate's own id names the run)
            cells.append(Text(r.parent[len(r.run) + 1:] if r.parent and r.parent.startswith(r.run + "-")
                              else r.parent or "–"))
        if full:
            cells.append(Text(r.run))
        if problems:
            cells.append(Text(r.problem))
        cells += [
            Text(r.stage), verdict_text(r.verdict),
            *([_time_cell(r.candidate_ms, cpu)] if compact else
              [_time_cell(r.device_ms, cpu), _time_cell(r.latency_ms, cpu),
               str(r.launches) if r.launches is not None else "–",
               Text(fmt_mj(r.energy_mj) if r.energy_mj is not None else "–" if r.energy_note is None else "–†",
                    style="" if r.energy_mj is not None else "dim")]),
            speedup_text(r.speedup_vs_eager, not cpu), speedup_text(r.speedup_vs_compile, not cpu),
            *([] if minimal else [fmt_pct(r.dram_pct)]),
        ]
        if full:
            cells.append(fmt_tokens(r.tokens))
        if spent:
            cells.append(fmt_cost(r.cost_usd))
        if failed:
            cells.append(Text(r.message or "", style="dim"))
        table.add_row(*cells)
    notes = ["ranked by time within each problem and device; ★ the run's best"] if rows else []
    if objectives and (compact or len(objectives) == 1):
        one = next(iter(objectives)) if len(objectives) == 1 else None
        notes.append("speedups on " + ("the device clock; ranked by energy per call" if one == "energy" else
                                       f"the {one} clock" if one else "each run's own clock")
                     + (" ◆" if full else ""))
    unmeasured = sorted({r.energy_note for r in rows if r.energy_mj is None and r.energy_note})
    if unmeasured and full:
        notes.append("† energy: not measured: " + "; ".join(unmeasured))
    if any_cpu:
        notes.append("* CPU-mode (TRITON_INTERPRET=1) timings: they say nothing about the GPU")
    if notes:
        table.caption = "\n".join(notes)
        table.caption_justify = "left"
    return table


def _time_cell(ms: float | None, cpu: bool) -> Text:
    return Text(fmt_ms(ms) + ("*" if cpu and ms is not None else ""), style="dim" if cpu else "")


def leaderboard_fitting(rows: list[LeaderRow], console: Console, title: str | None = "Leaderboard") -> Table:
    """The full leaderboard where it fits the console, else its compact form."""
    from rich.measure import Measurement

    # The fullest form whose unbreakable columns fit, with room for `why` (the one column that wraps) where it shows.
    room = 24 if any(r.message is not None for r in rows) else 0
    for form in ({}, {"compact": True}):
        bare = leaderboard_table(rows, title, why=False, **form)
        if Measurement.get(console, console.options.update_width(100_000), bare).maximum + room <= console.width:
            return leaderboard_table(rows, title, **form)
    return leaderboard_table(rows, title, minimal=True)


def short_candidate_id(candidate: str, run: str) -> str:
    """'20261123-081502-3fa2-i3-c1' -> '3fa2-i3-c1': the run's random tag and the candidate part."""
    if candidate.startswith(run + "-"):
        return run.rsplit("-", 1)[-1] + candidate[len(run):]
    return candidate


def candidate_view(c: Candidate, *, prompt: bool = True, response: bool = True) -> RenderableType:
    """Everything `agent show` prints: header, verdict and message, checks, timing, metrics, code, prompt, response."""
    r = c.result
    header = Table.grid(padding=(0, 2))
    header.add_column(style="bold")
    header.add_column()
    header.add_row("candidate", Text(c.id))
    header.add_row("run", Text(f"{c.run_id}  iteration {c.iteration}  #{c.index}  stage {c.stage}"))
    if c.iteration >= 1:
        header.add_row("parent", Text(c.parent or "none (no correct code yet: the prompt showed the starting code)"))
    if c.idea:
        header.add_row("idea", Text(c.idea + (f"  (for {c.finding})" if c.finding else "")))
    header.add_row("verdict", verdict_text(r.verdict))
    if c.answer is not None:
        u = c.answer.usage
        header.add_row("model", Text(f"{c.answer.model}  {fmt_tokens(u.prompt_tokens + u.completion_tokens)} tokens"
                                f"  {fmt_cost(u.cost_usd, u.priced)}  {c.answer.latency_s:.1f} s"))
    header.add_row("evaluated", f"on {r.device} in {r.duration_s:.1f} s, {_when(c.created_at)}")
    parts: list[RenderableType] = [header, *_verdict_parts(r)]
    if c.profile is not None and c.profile.kernels:
        parts.append(metrics_table(c))
    if c.code:
        parts.append(Panel(Syntax(c.code, "python", line_numbers=True, word_wrap=True), title="code",
                           title_align="left"))
    if prompt and c.prompt:
        parts.append(Panel(Text(c.prompt), title="prompt", title_align="left", border_style="dim"))
    if response and c.answer is not None and c.answer.text:
        parts.append(Panel(Text(c.answer.text), title="response", title_align="left", border_style="dim"))
    return Group(*parts)


def checks_table(result: EvalResult) -> Table:
    t = Table(title="checks", title_justify="left", header_style="bold")
    for col in ("size", "distribution", "shapes", "error", "eager error", "tolerance", "ok", "note"):
        t.add_column(col, justify="right" if col in ("error", "eager error", "tolerance") else "left")
    for ch in result.checks:
        t.add_row(ch.size, ch.distribution, " ".join("×".join(map(str, s)) for s in ch.shapes),
                  sci(ch.error), sci(ch.eager_error), sci(ch.tolerance),
                  Text("pass", style="green") if ch.passed else Text("FAIL", style="bold red"), ch.note)
    return t


def timing_table(result: EvalResult) -> Table:
    """Both clocks side by side (the run's objective marked), the baselines on each, launches and host time; energy per
    call where it was measured (else the caption says why not)."""
    tm = result.timing
    assert tm is not None
    t = Table(title="timing" + ("" if tm.meaningful else " (CPU mode: not meaningful)"), title_justify="left",
              header_style="bold")
    mark = {c: " ◆" if tm.objective == c else "" for c in ("device", "latency", "energy")}
    joules = tm.energy_mj is not None
    columns = ["", f"device{mark['device']}", "spread", f"latency{mark['latency']}", "spread"]
    columns += [f"energy{mark['energy']}", "spread"] if joules else []
    columns += ["speedup (device)", "speedup (latency)"] + (["energy saved"] if joules else [])
    for col in columns:
        t.add_column(col, justify="left" if not col else "right")

    def row(label: str, device: float | None, d_spread: float | None, latency: float | None,
            l_spread: float | None, mj: float | None, mj_spread: float | None, *speedups: RenderableType) -> None:
        cells: list[RenderableType] = [label, fmt_ms(device), fmt_pct(d_spread) if d_spread is not None else "",
                                       fmt_ms(latency), fmt_pct(l_spread) if l_spread is not None else ""]
        if joules:
            cells += [fmt_mj(mj), fmt_pct(mj_spread) if mj_spread is not None else ""]
        t.add_row(*cells, *(speedups if joules else speedups[:2]))

    row("candidate", tm.device_ms, tm.device_spread_pct, tm.latency_ms, tm.latency_spread_pct, tm.energy_mj,
        tm.energy_spread_pct, "", "", "")
    if tm.eager_device_ms is not None or tm.eager_latency_ms is not None:
        row("eager", tm.eager_device_ms, None, tm.eager_latency_ms, None, tm.eager_energy_mj,
            tm.eager_energy_spread_pct, speedup_text(tm.device_speedup_vs_eager, tm.meaningful),
            speedup_text(tm.latency_speedup_vs_eager, tm.meaningful),
            _less_energy(tm.energy_vs_eager))
    if tm.compile_device_ms is not None or tm.compile_latency_ms is not None:
        row("torch.compile", tm.compile_device_ms, None, tm.compile_latency_ms, None, tm.compile_energy_mj,
            tm.compile_energy_spread_pct,
            speedup_text(tm.device_speedup_vs_compile, tm.meaningful),
            speedup_text(tm.latency_speedup_vs_compile, tm.meaningful),
            _less_energy(tm.energy_vs_compile))
    if tm.compile_fp32_device_ms is not None:  # the fair mark at fp32 where the default one is outside tolerance
        row("torch.compile, TF32 off", tm.compile_fp32_device_ms, None, tm.compile_fp32_latency_ms, None, None, None,
            speedup_text(tm.device_speedup_vs_compile_fp32, tm.meaningful),
            speedup_text(tm.latency_speedup_vs_compile_fp32, tm.meaningful), "")
    facts = [f"◆ the objective ({tm.objective})", count(tm.repeats, "repeat")]
    if tm.launches is not None:
        facts.append(f"{tm.launches} kernel launch{'es' if tm.launches != 1 else ''} per forward")
    if tm.host_ms is not None and tm.meaningful:
        facts.append(f"host {fmt_ms(tm.host_ms)} to issue a call")
    if joules and tm.power_w is not None:
        facts.append(f"{tm.power_w:.0f} W while the calls ran back to back")
    if not joules:
        facts.append(energy_text(tm))
    t.caption = "; ".join(facts) + (f"; {tm.note}" if tm.note else "")
    return t


def _less_energy(x: float | None) -> Text:
    """'3.10× less' where the candidate takes less energy than the baseline per call."""
    if x is None:
        return Text("–", style="dim")
    return Text(f"{x:.2f}× less" if x >= 1 else f"{1 / x:.2f}× more", style="green" if x > 1 else "red")


def metrics_table(c: Candidate) -> RenderableType:
    p = c.profile
    assert p is not None
    kernels = list(p.kernels.values())
    t = Table(title=f"ncu metrics ({p.metric_set} set{', ' + p.gpu if p.gpu else ''})", title_justify="left",
              header_style="bold")
    t.add_column("metric")
    for k in kernels:
        t.add_column(k.name + (f" ×{k.launches}" if k.launches > 1 else ""), justify="right", overflow="fold")
    names: list[str] = []
    for k in kernels:
        names += [m for m in k.metrics if m not in names]
    for m in names:
        t.add_row(m, *(fmt_value(k.metrics[m]) if m in k.metrics else "–" for k in kernels))
    parts: list[RenderableType] = [t]
    if p.bottleneck is not None:
        parts.append(Text.assemble(("bottleneck: ", "bold"), (p.bottleneck.kind, "cyan"), f"  {p.bottleneck.reason}"))
    if p.report is not None:
        parts.append(Text(f"report: {p.report}", style="dim"))
    return Group(*parts)


def run_summary(run: RunRecord, top: list[LeaderRow] | None = None) -> RenderableType:
    """A run at a glance: config, status, spend, best; then its leaderboard top."""
    status_style = {"finished": "green", "running": "cyan", "interrupted": "yellow"}.get(run.status, "red")
    g = Table.grid(padding=(0, 2))
    g.add_column(style="bold")
    g.add_column()
    cfg = run.config
    g.add_row("run", run.id)
    g.add_row("status", Text(run.status, style=status_style))
    g.add_row("problem", f"{cfg.problem}  stage {cfg.stage}  on {run.gpu} ({run.device})")
    g.add_row("proposer", f"{cfg.llm}" + (f" ({cfg.model})" if cfg.llm.startswith("openai") else ""))
    g.add_row("search", f"{cfg.search}" + (f" {cfg.beam}" if cfg.search == "beam" else "")
              + f", memory {'on' if cfg.memory else 'off'}")
    g.add_row("objective", f"{cfg.objective} ({OBJECTIVE_WORDS[cfg.objective]})")
    if cfg.precision != "fp32":  # what "correct" means in this run
        g.add_row("numerics", f"{cfg.precision} (--precision {cfg.precision})")
    g.add_row("iterations", f"{run.iterations} of {cfg.iterations}, {count(run.candidates, 'candidate')}")
    u = run.usage
    g.add_row("usage", f"{fmt_tokens(u.prompt_tokens + u.completion_tokens)} tokens, {fmt_cost(u.cost_usd, u.priced)}"
                       + (f" of ${cfg.budget_usd:.2f}" if cfg.budget_usd is not None else ""))
    g.add_row("best", run.best or "–")
    parts: list[RenderableType] = [g]
    if top:
        parts.append(leaderboard_table(top, title=None))
    return Panel(Group(*parts), title="run", title_align="left")


OBJECTIVE_WORDS = {"latency": "a synchronized call, host included", "device": "GPU time of calls queued back to back",
                   "energy": "the GPU's energy per call, calls queued back to back"}


def _when(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _verdict_parts(r: EvalResult) -> list[RenderableType]:
    """The message, the checks and the timing: drawn alike by `agent show` and `agent eval`."""
    parts: list[RenderableType] = []
    if r.message:
        parts.append(Panel(Text(r.message), title="message", title_align="left",
                           border_style={"correct": "green", "needs_gpu": "cyan"}.get(r.verdict, "red")))
        if r.verdict != "correct":
            from agent.ruleindex import rules_named

            for rule in rules_named(r.message):  # where the rule lives: one step from the verdict to its code
                parts.append(Text.assemble(("rule ", "dim"), (rule.id, "bold"), ("  " + rule.file, "cyan"),
                                           (f"  ({rule.data})" if rule.data else "", "dim")))
    if r.checks:
        parts.append(checks_table(r))
    if r.timing is not None:
        parts.append(timing_table(r))
    return parts


def eval_view(result: EvalResult, problem: str, stage: str, answer: str | None = None) -> RenderableType:
    """`agent eval` of one answer, laid out as `agent show` lays out a candidate: a header, the message, the checks
    and the timing, then where the time went."""
    header = Table.grid(padding=(0, 2))
    header.add_column(style="bold")
    header.add_column()
    if answer:
        header.add_row("answer", Text(answer))
    header.add_row("problem", Text(f"{problem}  stage {stage}"))
    header.add_row("verdict", verdict_text(result.verdict))
    if result.kernels:
        header.add_row("kernels", Text(", ".join(result.kernels)))
    header.add_row("evaluated", f"on {result.device} in {result.duration_s:.1f} s")
    parts: list[RenderableType] = [header, *_verdict_parts(result)]
    if result.phases:
        parts.append(Text("where the time went: " + " · ".join(f"{k} {v:.1f} s" for k, v in result.phases.items()
                                                             if v >= 0.05), style="dim"))
    return Group(*parts)


def runs_table(records: list[RunRecord], best: dict[str, LeaderRow | None]) -> Table:
    """`agent runs`: one row per run, newest first: status, problem, stage, best on both clocks, candidates, cost,
    duration."""
    table = Table(title="Runs", title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("run", "status", "problem", "stage", "device", "best", "device ms", "latency ms", "×eager",
                 "candidates", "cost", "duration"):
        table.add_column(name, justify="right" if name in ("device ms", "latency ms", "×eager", "candidates", "cost",
                                                           "duration") else "left", no_wrap=True)
    now = datetime.now(timezone.utc)
    for r in records:
        b = best.get(r.id)
        cpu = b is not None and b.meaningful is False
        seconds = ((r.finished_at or now) - r.started_at).total_seconds()
        table.add_row(r.id, Text(r.status, style={"finished": "green", "failed": "red", "running": "cyan"}.get(
                          r.status, "yellow")), r.config.problem, r.config.stage, r.device,
                      short_candidate_id(b.candidate, r.id) if b else "–",
                      _time_cell(b.device_ms, cpu) if b else "–", _time_cell(b.latency_ms, cpu) if b else "–",
                      speedup_text(b.speedup_vs_eager, not cpu) if b else "–", str(r.candidates),
                      fmt_cost(r.usage.cost_usd, r.usage.priced),
                      _duration(seconds))
    return table


def _duration(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
