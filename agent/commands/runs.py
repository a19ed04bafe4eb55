"""CLI commands over recorded runs: `agent leaderboard`, `agent show`, `agent export`.

Thin on purpose: the store answers, agent.view renders. Imports happen inside handlers so `agent --help` stays light.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _add_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=Path("."), metavar="DIR",
                   help="directory holding candidates/ and profiles/ (default: the current directory)")


def register(sub: argparse._SubParsersAction) -> None:
    # `agent run` (agent/commands/run.py) records what the commands below read.
    p = sub.add_parser("leaderboard", help="rank recorded candidates by speedup vs eager",
                       description="Rank recorded candidates by speedup vs eager (then time). Only correct ones "
                                   "unless --all.")
    p.add_argument("--problem", metavar="P", help="only this problem's runs")
    p.add_argument("--run", metavar="RUN_ID", help="only this run (a unique prefix is enough)")
    p.add_argument("--stage", metavar="S", help="only candidates proposed at this stage")
    p.add_argument("--all", action="store_true", dest="include_all", help="every verdict, failures ranked last")
    p.add_argument("--limit", type=int, metavar="N", help="at most N rows")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    _add_root(p)
    p.set_defaults(func=leaderboard)

    p = sub.add_parser("show", help="show one candidate: verdict, checks, timing, metrics, code, prompt, response",
                       description="Show one recorded candidate.")
    p.add_argument("candidate", metavar="CANDIDATE", help="candidate id (a unique prefix is enough)")
    p.add_argument("--no-prompt", action="store_true", help="leave out the prompt")
    p.add_argument("--no-response", action="store_true", help="leave out the model's response")
    p.add_argument("--json", action="store_true", help="print the candidate as JSON")
    _add_root(p)
    p.set_defaults(func=show)

    p = sub.add_parser("export", help="write a candidate's kernel code to a file",
                       description="Write a recorded candidate's code (a ModelNew module) to a file or stdout.")
    p.add_argument("candidate", metavar="CANDIDATE", help="candidate id (a unique prefix is enough)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="where to write it (default: stdout)")
    _add_root(p)
    p.set_defaults(func=export)


def _store(args: argparse.Namespace):
    from agent.store import Store

    return Store(args.root)


def _console():
    from agent.view import console

    return console()


def leaderboard(args: argparse.Namespace) -> int:
    from agent.errors import UserError
    from agent.view import leaderboard_fitting

    store = _store(args)
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be at least 1, not {args.limit}")
    if not store.exists():
        if args.json:
            print("[]")
        else:
            _console().print(f"No runs recorded under {store.candidates_dir} yet: start one with `agent run`.")
        return 0
    with store:
        rows = store.leaderboard(problem=args.problem, run=args.run, stage=args.stage, include_all=args.include_all,
                                 limit=args.limit)
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
        return 0
    if not rows:
        what = "candidates" if args.include_all else "correct candidates"
        filters = ", ".join(f"{k} {v}" for k, v in (("problem", args.problem), ("run", args.run),
                                                     ("stage", args.stage)) if v)
        hint = "" if args.include_all else " (--all shows every verdict)"
        _console().print(f"No {what}{' for ' + filters if filters else ''} yet{hint}.")
        return 0
    console = _console()
    console.print(leaderboard_fitting(rows, console))
    return 0


def show(args: argparse.Namespace) -> int:
    from agent.view import candidate_view

    store = _store(args)
    _require_store(store, args.candidate)
    with store:
        c = store.get_candidate(args.candidate)
    if args.json:
        print(c.model_dump_json(indent=2))
        return 0
    _console().print(candidate_view(c, prompt=not args.no_prompt, response=not args.no_response))
    return 0


def export(args: argparse.Namespace) -> int:
    from agent.errors import UserError

    store = _store(args)
    _require_store(store, args.candidate)
    with store:
        c = store.get_candidate(args.candidate)
    if not c.code:
        raise UserError(f"candidate {c.id} has no code to export (verdict: {c.result.verdict})")
    if args.output is None:
        sys.stdout.write(c.code if c.code.endswith("\n") else c.code + "\n")
        return 0
    try:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(c.code if c.code.endswith("\n") else c.code + "\n", encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot write {args.output}: {e.strerror or e}") from None
    from agent.view import console

    console(stderr=True).print(f"wrote {c.id} ({c.result.verdict}) to {args.output}")
    return 0


def _require_store(store, candidate: str) -> None:
    from agent.errors import UserError

    if not store.exists():
        raise UserError(f"unknown candidate {candidate!r}: no runs under {store.candidates_dir}",
                        "start one with `agent run`")
