"""The one console factory (where every command's output goes, sized for a terminal or a pipe), and paging."""

from __future__ import annotations

import os

from rich.console import Console, RenderableType

PIPE_WIDTH = 160  # piped output (a log, `| less`) gets a wide page, not rich's 80 columns, so tables keep every column


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr): the terminal's width, $COLUMNS where set, else a wide page for a pipe."""
    c = Console(stderr=stderr, highlight=False)
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c = Console(stderr=stderr, highlight=False, width=PIPE_WIDTH)
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
