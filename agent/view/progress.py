"""The live progress of `agent run` (agent.protocols.Progress): a live footer on a terminal, one line per event
otherwise, JSON lines with `--json`, nothing with `--quiet`."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, TextIO

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from agent.schema import CLOCK_KEYS, Timing
from agent.view.fmt import clocks_text, fmt_cost, fmt_pct, fmt_tokens, verdict_text
from agent.view.terminal import console as make_console

if TYPE_CHECKING:
    from agent.schema import Candidate, Usage

Mode = Literal["auto", "live", "lines", "quiet", "json"]


class LiveProgress:
    """The run loop's progress reporter (agent.loop.Progress).

    live: a live footer (iteration, stage, best so far, tokens and cost) under one line per candidate;
    lines: the same lines without the footer (not a terminal); json: one JSON object per event on `stream`;
    quiet: nothing. Use as a context manager so the live display is always torn down.
    """

    def __init__(self, mode: Mode = "auto", *, total_iterations: int | None = None, console: Console | None = None,
                 stream: TextIO | None = None) -> None:
        self.console = console or make_console()
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
                           **_clock_keys(t)):
            return
        line = Text.assemble("  ", (f"#{candidate.index} ", "dim"), verdict_text(r.verdict))
        if t is not None:
            line.append(f"  {clocks_text(t)}")
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
        if self._emit_json("best", candidate=candidate.id, **_clock_keys(t), dram_pct=dram):
            return
        self.best_line = Text.assemble(("best ", "bold"), (candidate.id, "green"))
        if t is not None:
            self.best_line.append(f"  {clocks_text(t)}")
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


def _clock_keys(t: Timing | None) -> dict[str, Any]:
    return t.keys() if t is not None else {k: None for k in CLOCK_KEYS}


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message and message.strip() else ""
