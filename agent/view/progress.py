"""The live progress of `agent run` (agent.protocols.Progress): a live footer on a terminal, one line per event
otherwise, JSON lines with `--json`, nothing with `--quiet`.

Every mode says what the run is doing now (its phase: proposing, evaluating k of K, profiling) and for how long: the
footer ticks, a log gets a line when a phase begins and a "still ..." line every `heartbeat_s` while it lasts, and
JSON events carry `elapsed_s` since the run began.
"""

from __future__ import annotations

import json
import sys
import threading
import time
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
                 stream: TextIO | None = None, best: Candidate | None = None, heartbeat_s: float = 60.0) -> None:
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
        self.started = time.monotonic()
        self.phase_name, self.phase_detail, self.phase_started, self.expected = "starting", "", self.started, 0
        self.best_line: Text = Text("no correct kernel yet", style="dim")
        if best is not None:  # a resumed run starts from its best, not from nothing
            self.best_line = self._best_text(best)
        self.tokens = 0
        self.cost = 0.0
        self.priced = True
        self.heartbeat_s = heartbeat_s
        self._lock = threading.RLock()  # the heartbeat thread prints too
        self._quit = threading.Event()
        self._live: Any = None

    # context management -------------------------------------------------------------

    def __enter__(self) -> LiveProgress:
        if self.mode == "live":
            from rich.live import Live

            # get_renderable: the footer is rebuilt at every refresh, so its clocks tick between events
            self._live = Live(console=self.console, refresh_per_second=4, transient=True,
                              get_renderable=self._footer)
            self._live.start()
        elif self.mode == "lines" and self.heartbeat_s > 0:
            threading.Thread(target=self._heartbeat, name="agent-progress", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._quit.set()
        if self._live is not None:
            self._live.stop()
            self._live = None
            self.console.print(self._footer())  # the final state stays on screen

    # events (agent.loop.Progress) -----------------------------------------------------

    def start_iteration(self, iteration: int, stage: str, reason: str = "") -> None:
        with self._lock:
            self.iteration, self.stage, self.reason, self.landed = iteration, stage, reason, 0
            self._set_phase("starting", "")
        if self._emit_json("iteration", iteration=iteration, stage=stage, reason=reason):
            return
        total = f"/{self.total}" if self.total is not None else ""
        self._line(Text.assemble(("iteration ", "bold"), (f"{iteration}{total}", "bold"), "  ", (stage, "cyan"),
                                 (f"  {reason}" if reason else "", "dim"), (f"  [{self._clock()}]", "dim")))

    def phase(self, name: str, detail: str = "", total: int = 0) -> None:
        """A phase of the iteration begins: proposing (waiting for the model), evaluating `total` candidates,
        profiling."""
        with self._lock:
            self._set_phase(name, detail)
            self.expected = total
        if self._emit_json("phase", phase=name, detail=detail, total=total or None):
            return
        if self._live is None:  # a log: a line per phase (the footer shows it on a terminal)
            self._line(Text.assemble("  ", (f"{self._phase_text()}", "dim"), (f"  [{self._clock()}]", "dim")))
        else:
            self._refresh()

    def candidate_done(self, candidate: Candidate) -> None:
        r = candidate.result
        t = r.timing
        with self._lock:
            self.landed += 1
        if self._emit_json("candidate", candidate=candidate.id, iteration=candidate.iteration, index=candidate.index,
                           stage=candidate.stage, parent=candidate.parent, verdict=str(r.verdict),
                           message=_first_line(r.message),
                           duration_s=round(r.duration_s, 3), phases=r.phases, **_clock_keys(t)):
            return
        line = Text.assemble("  ", (f"#{candidate.index} ", "dim"), verdict_text(r.verdict))
        if t is not None:
            line.append(f"  {clocks_text(t)}")
        if r.verdict != "correct" and r.message:
            line.append(f"  {_first_line(r.message)[:100]}", style="dim")
        line.append(f"  {candidate.id}  {r.duration_s:.1f} s", style="dim")
        self._line(line)

    def new_best(self, candidate: Candidate) -> None:
        t = candidate.result.timing
        dram = None
        if candidate.profile is not None:
            from agent.store import longest_kernel_dram_pct

            dram = longest_kernel_dram_pct(candidate.profile)
        if self._emit_json("best", candidate=candidate.id, **_clock_keys(t), dram_pct=dram):
            return
        self.best_line = self._best_text(candidate, dram)
        self._line(Text.assemble("  ", ("★ new ", "bold green"), self.best_line))

    @staticmethod
    def _best_text(candidate: Candidate, dram: float | None = None) -> Text:
        t = candidate.result.timing
        line = Text.assemble(("best ", "bold"), (candidate.id, "green"))
        if t is not None:
            line.append(f"  {clocks_text(t)}")
        if dram is not None:
            line.append(f"  DRAM {fmt_pct(dram)}")
        return line

    best = new_best  # the name the first sketch used

    def usage(self, usage: Usage) -> None:
        self.tokens = usage.prompt_tokens + usage.completion_tokens
        self.cost, self.priced = usage.cost_usd, usage.priced
        if self._emit_json("usage", prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                           cost_usd=usage.cost_usd if usage.priced else None):
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
            fields = {"event": event, "time": datetime.now(timezone.utc).isoformat(),
                      "elapsed_s": round(time.monotonic() - self.started, 3), **fields}
            with self._lock:
                self.stream.write(json.dumps(fields) + "\n")
                self.stream.flush()
            return True
        return self.mode == "quiet"

    def _line(self, renderable: RenderableType) -> None:
        with self._lock:
            self.console.print(renderable)
        self._refresh()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def _set_phase(self, name: str, detail: str) -> None:
        self.phase_name, self.phase_detail, self.phase_started = name, detail, time.monotonic()

    def _phase_text(self) -> str:
        if self.expected:
            return f"{self.phase_name} {self.expected}: {min(self.landed, self.expected)} done"
        return f"{self.phase_name}: {self.phase_detail}" if self.phase_detail else self.phase_name

    def _clock(self) -> str:
        return _duration(time.monotonic() - self.started)

    def _heartbeat(self) -> None:
        """A log's sign of life: a long phase (a slow model, a big round) gets a line every heartbeat_s."""
        while not self._quit.wait(self.heartbeat_s):
            with self._lock:
                lasted = time.monotonic() - self.phase_started
                if lasted < self.heartbeat_s * 0.9:
                    continue
                text = f"  still {self._phase_text()} ({_duration(lasted)} in this phase)  [{self._clock()}]"
                self.console.print(Text(text, style="dim"))

    def _footer(self) -> RenderableType:
        from rich.spinner import Spinner

        total = f"/{self.total}" if self.total is not None else ""
        it = "starting" if self.iteration is None else f"iteration {self.iteration}{total} · {self.stage}"
        now = time.monotonic()
        status = Text.assemble((it, "bold"), " · ", (self._phase_text(), "cyan"),
                               f" {_duration(now - self.phase_started)}", f" · run {_duration(now - self.started)}",
                               f" · {fmt_tokens(self.tokens)} tokens · {fmt_cost(self.cost, self.priced)}")
        grid = Table.grid(padding=(0, 1))
        grid.add_row(Spinner("dots") if self._live is not None else Text("■", style="dim"), status)
        grid.add_row(Text(""), self.best_line)
        return grid


def _duration(seconds: float) -> str:
    """0:07, 12:03, 1:02:03: a clock a person reads at a glance."""
    s = int(seconds)
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def _clock_keys(t: Timing | None) -> dict[str, Any]:
    return t.keys() if t is not None else {k: None for k in CLOCK_KEYS}


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message and message.strip() else ""
