"""The one console factory: where every command's output goes, sized for a terminal or a pipe."""

from __future__ import annotations

import os

from rich.console import Console

PIPE_WIDTH = 160  # piped output (a log, `| less`) gets a wide page, not rich's 80 columns, so tables keep every column


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr): the terminal's width, $COLUMNS where set, else a wide page for a pipe."""
    c = Console(stderr=stderr, highlight=False)
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c = Console(stderr=stderr, highlight=False, width=PIPE_WIDTH)
    if not c.is_terminal:  # a line of text stays one line in a log (a command to copy is never split); tables fit
        c.soft_wrap = True
    return c
