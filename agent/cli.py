"""`agent` command line: builds the parser from agent.commands.*, turns user errors into one red line.

Exit codes: 0 ok, 2 usage or user error (one line, no traceback), 1 the harness cannot evaluate (one line) or an
internal error (one line; the traceback with --debug), 128 + N stopped by signal N (Ctrl-C 130, SIGTERM 143, SIGHUP
129), after killing the candidates' sandboxes and marking a run interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
from typing import NoReturn

from agent.commands import COMMAND_MODULES
from agent.errors import HarnessError, Interrupted, UserError


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line naming the problem (and the valid choices), exit 2."""

    def error(self, message: str) -> NoReturn:
        _fail(f"{self.prog}: {message}")


def _fail(message: str, hint: str | None = None, code: int = 2) -> NoReturn:
    from agent.view import console

    from rich.markup import escape

    err = console(stderr=True)
    err.soft_wrap = True
    # the message quotes the user's input and config keys ([prices."MODEL"]): text, never markup
    err.print(f"[bold red]error:[/] {escape(message)}" + (f" [dim]({escape(hint)})[/]" if hint else ""), markup=True)
    raise SystemExit(code)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agent",
        description="Optimize a PyTorch model's hot path into Triton kernels, one Nsight Compute-driven stage at a time.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"agent.commands.{name}").register(sub)
    return parser


def _stop(signum: int, frame: object) -> None:
    """SIGINT, SIGTERM, SIGHUP: candidates' sandboxes first (their own sessions never see the signal, and threads
    waiting on them would keep the agent alive), then unwind like Ctrl-C: a run records itself interrupted."""
    from agent.harness.wall.proctree import kill_running

    kill_running()
    raise Interrupted(signum)


def _configure(args: argparse.Namespace) -> None:
    """The user's configuration (agent.config) on `args.user`; for a command with --root, the store's folder
    (agent.store.locate: the flag, the configured one, the nearest found above, else here) on `args.root`, and why
    on `args.store_root`."""
    from agent.config import load_user_config, source_of, value_sources

    args.user = load_user_config()
    if hasattr(args, "root"):
        from agent.store.locate import resolve_root

        args.store_root = resolve_root(args.root, args.user.store.root, source_of("store.root", value_sources()))
        args.root = args.store_root.path


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # `agent` alone: what it can do, not an error
        parser.print_help()
        return 0
    # --debug lines say when (ms since the start): where a run's seconds go is most of what they are read for
    when = "%(relativeCreated)7.0f ms " if args.debug else ""
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format=when + "%(levelname)s %(name)s: %(message)s")
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _stop)
    try:
        _configure(args)
        return int(args.func(args) or 0)
    except UserError as e:
        _fail(e.message, e.hint)
    except HarnessError as e:  # not the user's mistake, not a bug of ours either: one line, exit 1
        _fail(e.message, e.hint, code=1)
    except KeyboardInterrupt as e:  # exit 128 + the signal, as a shell reports a process it stopped
        signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
        message = e.message if isinstance(e, Interrupted) else "interrupted"
        _fail(f"{message} ({signal.Signals(signum).name})", e.hint if isinstance(e, Interrupted) else None,
              code=128 + signum)
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug: keep the one-line contract unless asked for the traceback
        if args.debug:
            raise
        from agent.view import console

        console(stderr=True).print(
            f"[bold red]internal error:[/] {type(e).__name__}: {e} [dim](rerun with --debug for the traceback)[/]"
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
