"""CLI commands over recorded runs: `agent runs`, `agent leaderboard`, `agent show`, `agent export`.

Thin on purpose: the store answers, agent.view renders. Imports happen inside handlers so `agent --help` stays light.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent.plural import count


def _add_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="directory holding candidates/ and profiles/ (default: the config's store.root, else the "
                        "nearest folder at or above here holding one, else .)")


def register(sub: argparse._SubParsersAction) -> None:
    # `agent run` (agent/commands/run.py) records what the commands below read.
    p = sub.add_parser("leaderboard", help="rank recorded candidates by time within each problem",
                       description="Rank recorded candidates by time on their run's clock, within each problem and "
                                   "device (times of different problems are not compared). Only correct ones "
                                   "unless --all.")
    p.add_argument("--problem", metavar="P", help="only this problem's runs")
    p.add_argument("--run", metavar="RUN_ID", help="only this run (a unique prefix is enough)")
    p.add_argument("--stage", metavar="S", help="only candidates proposed at this stage")
    p.add_argument("--all", action="store_true", dest="include_all", help="every verdict, failures ranked last")
    p.add_argument("--limit", type=int, metavar="N", help="at most N rows")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    _add_root(p)
    p.set_defaults(func=leaderboard)

    p = sub.add_parser("show", help="show one candidate: verdict, checks, timing, metrics, code (prompt, response)",
                       description="Show one recorded candidate: verdict and message, checks, timing on both clocks, "
                                   "metrics and code; the prompt and the model's response with --prompt, --response "
                                   "or --full. On a terminal, a view taller than the screen opens in $PAGER (less).")
    p.add_argument("candidate", metavar="CANDIDATE", help="candidate id (a unique prefix is enough)")
    p.add_argument("--prompt", action="store_true", help="add the prompt it answered")
    p.add_argument("--response", action="store_true", help="add the model's whole response")
    p.add_argument("--full", action="store_true", help="add both")
    p.add_argument("--sass", action="store_true", help="instead: its kernels' SASS with ncu's counters per instruction "
                   "(from its saved full-set report)")
    p.add_argument("--no-pager", action="store_true", help="print straight to the terminal")
    p.add_argument("--no-prompt", action="store_true", help=argparse.SUPPRESS)  # the old default's opt-outs
    p.add_argument("--no-response", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print the candidate as JSON")
    _add_root(p)
    p.set_defaults(func=show)

    p = sub.add_parser("runs", help="list recorded runs; remove runs (rm, prune); rebuild the index (reindex)",
                       description="list (default): every run with its status, problem, stage, best on both clocks, "
                                   "candidates, cost and duration. rm RUN...: delete runs (files and index rows). "
                                   "prune [--status S]: delete every failed and interrupted run (or those of status "
                                   "S). reindex: rebuild candidates/index.sqlite from the files, naming any it "
                                   "cannot read.")
    p.add_argument("action", nargs="?", default="list", choices=["list", "rm", "prune", "reindex"])
    p.add_argument("ids", nargs="*", metavar="RUN_ID", help="for rm: the runs (a unique prefix is enough)")
    p.add_argument("--status", action="append", choices=["failed", "interrupted", "finished"],
                   help="for prune: only runs with this status (repeatable; default: failed and interrupted)")
    p.add_argument("--json", action="store_true", help="list: a JSON list")
    _add_root(p)
    p.set_defaults(func=runs)

    p = sub.add_parser("export", help="write a candidate's kernel code to a file",
                       description="Write a recorded candidate's code (a ModelNew module) to a file or stdout.")
    p.add_argument("candidate", metavar="CANDIDATE", help="candidate id (a unique prefix is enough)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="where to write it (default: stdout)")
    _add_root(p)
    p.set_defaults(func=export)


def _store(args: argparse.Namespace):
    from agent.store import Store

    return Store(args.root)


def _nothing_recorded(args: argparse.Namespace, store) -> bool:
    """An empty root: say so (or print an empty JSON list) and tell the caller there is nothing more to show."""
    if store.exists():
        return False
    if args.json:
        print("[]")
    else:
        searched = getattr(args, "store_root", None) is not None and args.store_root.source == "working directory"
        _console().print(f"No runs recorded under {store.candidates_dir}{' or any folder above' if searched else ''} "
                         f"yet: start one with `agent run`.")
    return True


def _console():
    from agent.view import console

    return console()


def leaderboard(args: argparse.Namespace) -> int:
    from agent.errors import UserError
    from agent.view import leaderboard_fitting

    store = _store(args)
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be at least 1, not {args.limit}")
    if args.stage is not None:  # a typo must not read as "nothing there yet"
        from agent.stages import get_stage

        get_stage(args.stage)
    if _nothing_recorded(args, store):
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


def _show_sass(store, c) -> int:  # store: agent.store.Store, c: agent.schema.Candidate
    """The candidate's SASS from its saved report (no GPU needed); one line where there is none."""
    from agent.errors import UserError
    from agent.ncu.sass import read_sass
    from agent.view.profiles import sass_view

    report = store.profiles_dir / c.run_id / f"{c.id}.ncu-rep"
    if not report.is_file():
        raise UserError(f"candidate {c.id} has no saved ncu report (only a run's new bests are profiled)",
                        f"agent export {c.id} -o k.py && agent profile k.py --set full")
    from agent.view.terminal import paged

    paged(_console(), sass_view(read_sass(report)))
    return 0


def show(args: argparse.Namespace) -> int:
    from agent.view import candidate_view

    store = _store(args)
    _require_store(store, args.candidate)
    with store:
        c = store.get_candidate(args.candidate)
    if args.json:  # ASCII: an answer's C1 controls and bidi overrides are \u escapes, as its ESC is
        print(json.dumps(c.model_dump(mode="json"), indent=2))
        return 0
    if args.sass:
        return _show_sass(store, c)
    view = candidate_view(c, prompt=(args.prompt or args.full) and not args.no_prompt,
                          response=(args.response or args.full) and not args.no_response)
    from agent.view.terminal import paged

    paged(_console(), view, pager=not args.no_pager)
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
        from agent.printable import printable

        code = c.code if c.code.endswith("\n") else c.code + "\n"
        # to a file or a pipe the code as it was judged; to a terminal, never an answer's control sequence
        sys.stdout.write(printable(code) if sys.stdout.isatty() else code)
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


def runs(args: argparse.Namespace) -> int:
    """`agent runs [list|rm|prune|reindex]`."""
    import shutil

    from agent.errors import UserError

    store = _store(args)
    if args.action != "rm" and args.ids:
        raise UserError(f"agent runs {args.action} takes no run ids (did you mean `agent runs rm {args.ids[0]}`?)")
    if args.action == "list":
        return _list_runs(args, store)
    if not store.exists():
        raise UserError(f"no runs recorded under {store.candidates_dir}")
    with store:
        if args.action == "reindex":
            n = store.reindex()
            _console().print(f"reindexed {count(len(store.list_runs()), 'run')}, {count(n, 'candidate')} "
                             f"from {store.candidates_dir}")
            for why in store.skipped:
                _console().print(f"skipped (unreadable): {why}")
            return 0
        if args.action == "rm":
            if not args.ids:
                raise UserError("agent runs rm: name the runs to delete")
            doomed = [store.get_run(store.resolve_run(i)) for i in args.ids]
        else:
            wanted = set(args.status or ["failed", "interrupted"])
            doomed = [r for r in store.list_runs() if r.status in wanted]
        running = [r.id for r in doomed if r.status == "running"]
        if running:
            raise UserError(f"run {running[0]} is still running", "stop it first")
        for r in doomed:
            for d in (store.candidates_dir / r.id, store.profiles_dir / r.id):
                shutil.rmtree(d, ignore_errors=True)
        if doomed:
            store.reindex()  # the index follows the files: rebuilt without them
        _console().print(f"removed {count(len(doomed), 'run')}"
                         + (": " + ", ".join(r.id for r in doomed) if doomed else ""))
    return 0


def _list_runs(args: argparse.Namespace, store) -> int:
    from agent.view import runs_table

    if _nothing_recorded(args, store):
        return 0
    with store:
        records = store.list_runs()
        best = {r.id: store.leaderboard(run=r.id, limit=1) for r in records}  # unreadable runs: a warning each
    if args.json:
        print(json.dumps([{**r.model_dump(mode="json"), "best_row": best[r.id][0].model_dump(mode="json")
                           if best[r.id] else None} for r in records], indent=2))
        return 0
    if not records:  # every run removed: the same line as an empty root, not an empty table
        _console().print(f"No runs recorded under {store.candidates_dir}: start one with `agent run`.")
        return 0
    _console().print(runs_table(records, {k: v[0] if v else None for k, v in best.items()}))
    return 0
