"""`agent report RUN_ID [-o FILE]`: a run as one self-contained HTML page (agent.view.report). Read-only: it works on
a store this process cannot write, as `agent show` does."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="a run as one HTML page: progress on both clocks, energy, roofline, verdicts, "
                                      "new bests' diffs, stage path",
                       description="Write a recorded run as one self-contained HTML file (charts drawn by plotly, "
                                   "its JavaScript inside the file: it opens offline, with no server): the best so "
                                   "far against candidates and wall time on both clocks with eager and torch.compile, "
                                   "energy per call, the GPU's roofline with every profiled kernel, the verdicts of "
                                   "each iteration with every failure's message, each new best's metric and code "
                                   "changes, the stage path, the configuration, versions, tokens and cost.")
    p.add_argument("run", metavar="RUN_ID", help="the run (a unique prefix or its short tag is enough)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="where to write it (default: RUN_ID.html here)")
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="directory holding candidates/ and profiles/ (default: the config's store.root, else .)")
    p.set_defaults(func=report)


def report(args: argparse.Namespace) -> int:
    from agent.errors import UserError
    from agent.store import Store
    from agent.view import console
    from agent.view.report import render_report, report_input

    store = Store(args.root)
    if not store.exists():
        raise UserError(f"unknown run {args.run!r}: no runs under {store.candidates_dir}", "start one with `agent run`")
    with store:
        data = report_input(store, args.run)
    out: Path = args.output or Path(f"{data.run.id}.html")
    if out.is_dir():
        raise UserError(f"-o {out}: is a directory", f"name a file, e.g. -o {out / (data.run.id + '.html')}")
    page = render_report(data)
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from None
    console(stderr=True).print(f"wrote {out} ({len(page) / 1e6:.1f} MB, opens offline): run {data.run.id}, "
                               f"{len(data.candidates)} candidates")
    return 0
