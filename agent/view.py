"""Rich renderables for runs and candidates, and the live progress of `agent run` (with cli.py, the only printing module).

Builders return renderables and print nothing; the CLI decides where they go. `LiveProgress` is what the loop
reports to (agent.loop.Progress): a live footer on a terminal, one line per event otherwise, JSON lines with
`--json`, nothing with `--quiet`.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, TextIO

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # the store pulls in sqlite and pydantic models; the view only needs their shapes
    from agent.schema import Candidate, Usage
    from agent.store import LeaderRow, RunRecord

VERDICT_STYLE = {
    "correct": "bold green",
    "incorrect": "yellow",
    "timeout": "magenta",
}


# ---------------------------------------------------------------- formatting


def verdict_text(verdict: str) -> Text:
    return Text(str(verdict), style=VERDICT_STYLE.get(str(verdict), "red"))


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "–"
    return f"{ms:.3f} ms" if ms < 10 else f"{ms:.1f} ms"


def fmt_x(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def fmt_pct(p: float | None) -> str:
    return "–" if p is None else f"{p:.1f} %"


def fmt_tokens(n: int) -> str:
    return f"{n:,}" if n else "–"


def fmt_cost(usd: float) -> str:
    if not usd:
        return "–"
    return f"${usd:.4f}" if usd < 1 else f"${usd:.2f}"


def fmt_value(v: float | int) -> str:
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"


def _speedup_text(x: float | None) -> Text:
    if x is None:
        return Text("–", style="dim")
    return Text(fmt_x(x), style="green" if x > 1.0 else "red" if x < 1.0 else "")


# ---------------------------------------------------------------- tables and panels


def leaderboard_table(rows: list[LeaderRow], title: str | None = "Leaderboard", *, compact: bool = False) -> Table:
    """Rank, candidate, run, stage, iteration, verdict, time, speedups, DRAM %, tokens, cost.

    compact (narrow terminals): no run, iteration or tokens column (a candidate id holds run and iteration), ids
    shortened to the run's random tag plus the candidate part ('3fa2-i3-c1', which `agent show` accepts), shorter
    headers, cost only when something was spent.
    """
    full = not compact
    spent = full or any(r.cost_usd for r in rows)
    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=compact)
    columns = [("#", "#", True), ("candidate", "candidate", True), ("run", "", full), ("stage", "stage", True),
               ("iter", "", full), ("verdict", "verdict", True), ("time", "time", True),
               ("vs eager", "×eager", True), ("vs compile", "×compile", True), ("DRAM", "DRAM", True),
               ("tokens", "", full), ("cost", "cost", spent)]
    for name, short, shown in columns:
        if shown:
            table.add_column(name if full else short, justify="left" if name in ("candidate", "run", "stage", "verdict")
                             else "right", no_wrap=name != "stage", overflow="fold" if name == "stage" else "ellipsis")
    any_cpu = False
    for r in rows:
        cpu = r.meaningful is False
        any_cpu |= cpu
        cells: list[RenderableType] = [str(r.rank), Text(short_candidate_id(r.candidate, r.run) if compact
                                                          else r.candidate)]
        if full:
            cells.append(Text(r.run))
        cells += [
            Text(r.stage), *([str(r.iteration)] if full else []), verdict_text(r.verdict),
            Text(fmt_ms(r.candidate_ms) + ("*" if cpu else ""), style="dim" if cpu else ""),
            _speedup_text(r.speedup_vs_eager), _speedup_text(r.speedup_vs_compile), fmt_pct(r.dram_pct),
        ]
        if full:
            cells.append(fmt_tokens(r.tokens))
        if spent:
            cells.append(fmt_cost(r.cost_usd))
        table.add_row(*cells)
    if any_cpu:
        table.caption = "* CPU-mode (TRITON_INTERPRET=1) timings: they say nothing about the GPU"
        table.caption_justify = "left"
    return table


def leaderboard_fitting(rows: list[LeaderRow], console: Console, title: str | None = "Leaderboard") -> Table:
    """The full leaderboard where it fits the console, else its compact form."""
    from rich.measure import Measurement

    table = leaderboard_table(rows, title)
    if Measurement.get(console, console.options.update_width(100_000), table).maximum <= console.width:
        return table
    return leaderboard_table(rows, title, compact=True)


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
    header.add_row("verdict", verdict_text(r.verdict))
    if c.answer is not None:
        u = c.answer.usage
        header.add_row("model", Text(f"{c.answer.model}  {fmt_tokens(u.prompt_tokens + u.completion_tokens)} tokens"
                                f"  {fmt_cost(u.cost_usd)}  {c.answer.latency_s:.1f} s"))
    header.add_row("evaluated", f"on {r.device} in {r.duration_s:.1f} s, {_when(c.created_at)}")
    parts: list[RenderableType] = [header]
    if r.message:
        parts.append(Panel(Text(r.message), title="message", title_align="left",
                           border_style="green" if r.verdict == "correct" else "red"))
    if r.checks:
        parts.append(checks_table(c))
    if r.timing is not None:
        parts.append(timing_table(c))
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


def checks_table(c: Candidate) -> Table:
    t = Table(title="checks", title_justify="left", header_style="bold")
    for col in ("size", "distribution", "shapes", "error", "eager error", "tolerance", "ok", "note"):
        t.add_column(col, justify="right" if col in ("error", "eager error", "tolerance") else "left")
    for ch in c.result.checks:
        t.add_row(ch.size, ch.distribution, " ".join("×".join(map(str, s)) for s in ch.shapes),
                  _sci(ch.error), _sci(ch.eager_error), _sci(ch.tolerance),
                  Text("pass", style="green") if ch.passed else Text("FAIL", style="bold red"), ch.note)
    return t


def timing_table(c: Candidate) -> Table:
    tm = c.result.timing
    assert tm is not None
    t = Table(title="timing" + ("" if tm.meaningful else " (CPU mode: not meaningful)"), title_justify="left",
              header_style="bold")
    for col in ("", "median", "spread", "speedup"):
        t.add_column(col, justify="left" if not col else "right")
    t.add_row("candidate", fmt_ms(tm.candidate_ms), fmt_pct(tm.candidate_spread_pct), "")
    if tm.eager_ms is not None:
        t.add_row("eager", fmt_ms(tm.eager_ms), fmt_pct(tm.eager_spread_pct), _speedup_text(tm.speedup_vs_eager))
    if tm.compile_ms is not None:
        t.add_row("torch.compile", fmt_ms(tm.compile_ms), fmt_pct(tm.compile_spread_pct),
                  _speedup_text(tm.speedup_vs_compile))
    if tm.wall_ms is not None:
        t.add_row("wall clock", fmt_ms(tm.wall_ms), "", "")
    t.caption = f"{tm.repeats} repeats" + (f"; {tm.note}" if tm.note else "")
    return t


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
    g.add_row("iterations", f"{run.iterations} of {cfg.iterations}, {run.candidates} candidates")
    u = run.usage
    g.add_row("usage", f"{fmt_tokens(u.prompt_tokens + u.completion_tokens)} tokens, {fmt_cost(u.cost_usd)}"
                       + (f" of ${cfg.budget_usd:.2f}" if cfg.budget_usd is not None else ""))
    g.add_row("best", run.best or "–")
    parts: list[RenderableType] = [g]
    if top:
        parts.append(leaderboard_table(top, title=None))
    return Panel(Group(*parts), title="run", title_align="left")


def _sci(x: float | None) -> str:
    return "–" if x is None else f"{x:.2e}"


def _when(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# ---------------------------------------------------------------- live progress

Mode = Literal["auto", "live", "lines", "quiet", "json"]


class LiveProgress:
    """The run loop's progress reporter (agent.loop.Progress).

    live: a live footer (iteration, stage, best so far, tokens and cost) under one line per candidate;
    lines: the same lines without the footer (not a terminal); json: one JSON object per event on `stream`;
    quiet: nothing. Use as a context manager so the live display is always torn down.
    """

    def __init__(self, mode: Mode = "auto", *, total_iterations: int | None = None, console: Console | None = None,
                 stream: TextIO | None = None) -> None:
        self.console = console or Console(highlight=False)
        if mode == "auto":
            mode = "live" if self.console.is_terminal else "lines"
        self.mode = mode
        self.stream = stream or sys.stdout
        self.total = total_iterations
        self.iteration: int | None = None
        self.stage = ""
        self.reason = ""
        self.landed = 0
        self.best_line: Text = Text("no correct kernel yet", style="dim")
        self.tokens = 0
        self.cost = 0.0
        self._live: Any = None

    # context management -------------------------------------------------------------

    def __enter__(self) -> LiveProgress:
        if self.mode == "live":
            from rich.live import Live

            self._live = Live(self._footer(), console=self.console, refresh_per_second=8, transient=True)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
            self.console.print(self._footer())  # the final state stays on screen

    # events (agent.loop.Progress) -----------------------------------------------------

    def start_iteration(self, iteration: int, stage: str, reason: str = "") -> None:
        self.iteration, self.stage, self.reason, self.landed = iteration, stage, reason, 0
        if self._emit_json("iteration", iteration=iteration, stage=stage, reason=reason):
            return
        total = f"/{self.total}" if self.total is not None else ""
        self._line(Text.assemble(("iteration ", "bold"), (f"{iteration}{total}", "bold"), "  ", (stage, "cyan"),
                                 (f"  {reason}" if reason else "", "dim")))

    def candidate_done(self, candidate: Candidate) -> None:
        r = candidate.result
        t = r.timing
        self.landed += 1
        if self._emit_json("candidate", candidate=candidate.id, iteration=candidate.iteration, index=candidate.index,
                           stage=candidate.stage, verdict=str(r.verdict), message=_first_line(r.message),
                           candidate_ms=t.candidate_ms if t else None,
                           speedup_vs_eager=t.speedup_vs_eager if t else None,
                           speedup_vs_compile=t.speedup_vs_compile if t else None):
            return
        line = Text.assemble("  ", (f"#{candidate.index} ", "dim"), verdict_text(r.verdict))
        if t is not None:
            line.append(f"  {fmt_ms(t.candidate_ms)}")
            if t.speedup_vs_eager is not None:
                line.append(f"  {fmt_x(t.speedup_vs_eager)} eager")
            if t.speedup_vs_compile is not None:
                line.append(f"  {fmt_x(t.speedup_vs_compile)} compile")
        if r.verdict != "correct" and r.message:
            line.append(f"  {_first_line(r.message)[:100]}", style="dim")
        line.append(f"  {candidate.id}", style="dim")
        self._line(line)

    def new_best(self, candidate: Candidate) -> None:
        t = candidate.result.timing
        dram = None
        if candidate.profile is not None:
            from agent.store import longest_kernel_dram_pct

            dram = longest_kernel_dram_pct(candidate.profile)
        if self._emit_json("best", candidate=candidate.id, candidate_ms=t.candidate_ms if t else None,
                           speedup_vs_eager=t.speedup_vs_eager if t else None,
                           speedup_vs_compile=t.speedup_vs_compile if t else None, dram_pct=dram):
            return
        self.best_line = Text.assemble(("best ", "bold"), (candidate.id, "green"))
        if t is not None:
            self.best_line.append(f"  {fmt_ms(t.candidate_ms)}  {fmt_x(t.speedup_vs_eager)} eager"
                                  f"  {fmt_x(t.speedup_vs_compile)} compile")
        if dram is not None:
            self.best_line.append(f"  DRAM {fmt_pct(dram)}")
        self._line(Text.assemble("  ", ("★ new ", "bold green"), self.best_line))

    best = new_best  # the name the first sketch used

    def usage(self, usage: Usage) -> None:
        self.tokens = usage.prompt_tokens + usage.completion_tokens
        self.cost = usage.cost_usd
        if self._emit_json("usage", prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                           cost_usd=usage.cost_usd):
            return
        self._refresh()

    def message(self, text: str) -> None:
        if self._emit_json("message", text=text):
            return
        self._line(Text(text))

    # plumbing --------------------------------------------------------------------------

    def _emit_json(self, event: str, **fields: Any) -> bool:
        """In json mode write the event and report True (handled); in quiet mode swallow it."""
        if self.mode == "json":
            fields = {"event": event, "time": datetime.now(timezone.utc).isoformat(), **fields}
            self.stream.write(json.dumps(fields) + "\n")
            self.stream.flush()
            return True
        return self.mode == "quiet"

    def _line(self, renderable: RenderableType) -> None:
        self.console.print(renderable)
        self._refresh()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._footer())

    def _footer(self) -> RenderableType:
        from rich.spinner import Spinner

        total = f"/{self.total}" if self.total is not None else ""
        it = "starting" if self.iteration is None else f"iteration {self.iteration}{total} · {self.stage}"
        status = Text.assemble((it, "bold"), f" · {self.landed} candidates",
                               f" · {fmt_tokens(self.tokens)} tokens · {fmt_cost(self.cost)}")
        grid = Table.grid(padding=(0, 1))
        grid.add_row(Spinner("dots") if self._live is not None else Text("■", style="dim"), status)
        grid.add_row(Text(""), self.best_line)
        return grid


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message and message.strip() else ""
