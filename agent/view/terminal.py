"""The one console factory (where every command's output goes, sized for a terminal or a pipe), and paging."""

from __future__ import annotations

import os
from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RichCast
from rich.segment import Segment

from agent.printable import is_printable, printable

PIPE_WIDTH = 160  # piped output (a log, `| less`) gets a wide page, not rich's 80 columns, so tables keep every column


class EscapingConsole(Console):
    """A console whose text segments never carry a control character: whatever a renderable holds (an answer's code
    in a Syntax, its exception text in a Text, a file name in a table cell) is drawn through agent.printable. Rich's
    own styles and cursor moves are not text segments: they pass. Nested renderables (a panel's, a table's cells)
    are rendered through this method too, so the escape applies before they are cropped to their width."""

    def render(self, renderable: ConsoleRenderable | RichCast | str,
               options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for seg in super().render(renderable, options):
            yield seg if seg.control or is_printable(seg.text) else Segment(printable(seg.text), seg.style)


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr): the terminal's width, $COLUMNS where set, else a wide page for a pipe."""
    c = EscapingConsole(stderr=stderr, highlight=False)
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c = EscapingConsole(stderr=stderr, highlight=False, width=PIPE_WIDTH)
    if not c.is_terminal:  # a line of text stays one line in a log (a command to copy is never split); tables fit
        c.soft_wrap = True
    return c


def paged(console: Console, renderable: RenderableType, pager: bool = True) -> None:
    """Print `renderable`; on a terminal, through $PAGER (less, colours kept) when it is taller than the screen."""
    if pager and console.is_terminal:
        lines = console.render_lines(renderable, console.options, pad=False)
        if len(lines) > console.height:
            os.environ.setdefault("LESS", "-R")  # less shows the colours rather than their escape codes
            with console.pager(styles=True):
                console.print(renderable)
            return
    console.print(renderable)
