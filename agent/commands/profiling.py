"""CLI commands for Nsight Compute profiles and recorded prompts:

    agent profile FILE          run a candidate under ncu, save the .ncu-rep
    agent ncu REPORT.ncu-rep    read a saved report without a GPU (table, JSON, the prompt's block, --diff B)
    agent prompts RUN_ID        re-render every prompt of a recorded run and compare it with what was sent
    agent replay REPORT|RUN_ID  either: a report file read as `agent ncu` reads it, a run id as `agent prompts` does

`agent ncu REPORT --format json` prints one object: each kernel name maps to {metric: value} (the stage's metric set,
as read), and, for full reports, the key "rules" maps each kernel name to its list of guided-analysis results
({rule, title, kind, message, estimated_speedup_pct}). With --diff B.ncu-rep it prints a JSON list of
{kernel, metric, before, after, delta, pct, direction} instead.

Imports of the profiling modules happen inside handlers so `agent --help` stays light.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agent.runconfig import DEFAULT_PROBLEM, DEFAULT_STAGE

from agent.errors import UserError

if TYPE_CHECKING:
    from agent.schema import Profile, Stage

METRICS_HEADER = "[NCU PROFILING METRICS]"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="profile a candidate's Triton kernels with Nsight Compute (needs a GPU)",
                       description="Run a candidate under ncu (in the harness sandbox, after warm-up, only its own "
                                   "Triton kernels) and save the .ncu-rep with its parsed metrics as JSON beside it.")
    p.add_argument("file", type=Path, metavar="FILE", help="the candidate: a .py module or a raw LLM answer")
    p.add_argument("--problem", default=DEFAULT_PROBLEM, metavar="P",
                   help=f"built-in problem name or path (default: {DEFAULT_PROBLEM})")
    p.add_argument("--stage", default=DEFAULT_STAGE, metavar="S", help=f"stage whose metrics to collect (default: {DEFAULT_STAGE})")
    p.add_argument("--set", dest="metric_set", choices=("stage", "full"), default="stage",
                   help="stage: the stage's metrics (fast); full: ncu's full set with guided-analysis rules")
    p.add_argument("-o", "--output", type=Path, metavar="PATH",
                   help="report path (default: profiles/adhoc/<FILE stem>.ncu-rep)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S", help="seconds before ncu is killed (default: 600)")
    p.add_argument("--clock-control", choices=("base", "none"), default="base",
                   help="base (default): SM clock locked to base, repeatable metrics; none: the GPU's own clocks")
    p.add_argument("--device", type=int, default=0, metavar="N", help="CUDA device index (default: 0)")
    p.set_defaults(func=profile_command)

    p = sub.add_parser("ncu", help="show a saved .ncu-rep as a table, JSON or the prompt's metrics block",
                       description="Read a saved Nsight Compute report (no GPU needed): a table per kernel with "
                                   "the stage's metrics, rule results and the bottleneck; JSON; or the exact "
                                   "[NCU PROFILING METRICS] block. --diff compares it with a second report.")
    p.add_argument("report", type=Path, metavar="REPORT", help="a .ncu-rep file")
    _report_flags(p)
    p.set_defaults(func=ncu_command)

    p = sub.add_parser("prompts", help="re-render every prompt of a recorded run and compare it with what was sent",
                       description="Re-render each iteration's prompt of a recorded run from what the store saved "
                                   "and say whether it is identical to the prompt that was sent.")
    p.add_argument("run", metavar="RUN_ID", help="a run id (a unique prefix is enough)")
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="directory holding candidates/ (default: the config's store.root, else the nearest folder "
                        "at or above here holding one, else .)")
    p.add_argument("--format", choices=("table", "json", "prompt"), default="table", help="output format (default: table)")
    p.set_defaults(func=prompts_command)

    p = sub.add_parser("replay", help="read what a run saved: a .ncu-rep report (as `agent ncu`) or a run's "
                                      "prompts (as `agent prompts`)",
                       description="Read saved profiles and prompts without a GPU: a report file is shown as `agent "
                                   "ncu REPORT` shows it (table, JSON, the prompt's block, diagnosis, SASS, --diff), "
                                   "anything else is a run id whose prompts are re-rendered as `agent prompts` does.")
    p.add_argument("target", metavar="REPORT|RUN_ID", help="a .ncu-rep file, or a run id (a unique prefix is enough)")
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="for a run id: the directory holding candidates/ (default: as `agent prompts`)")
    _report_flags(p)
    p.set_defaults(func=replay_command)


def _report_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json", "prompt", "diagnosis", "sass"), default="table",
                   help="output format (default: table); diagnosis: the root causes by estimated gain, largest "
                        "first, each with the symptoms it explains, then where the kernel sits; sass: the kernels' SASS with executed counts and warp samples "
                        "(full-set reports)")
    p.add_argument("--stage", default=DEFAULT_STAGE, metavar="S", help=f"stage whose metrics to show (default: {DEFAULT_STAGE})")
    p.add_argument("--diff", type=Path, metavar="B.ncu-rep", help="compare with this report: before=REPORT, after=B")


# ---------------------------------------------------------------- handlers


def profile_command(args: argparse.Namespace) -> int:
    from agent.harness.static.extract import extract_code, why_no_code
    from agent.problems import load_problem
    from agent.profiler import ProfileRequest, profile
    from agent.view import console, profile_view

    if args.file.is_dir():
        raise UserError(f"{args.file} is a directory, not an answer file")
    if not args.file.is_file():
        raise UserError(f"no such file: {args.file}")
    code = extract_code(args.file.read_text(errors="replace"))
    if code is None:
        raise UserError(f"{args.file}: {why_no_code(args.file.read_text(errors='replace'))}")
    stage = find_stage(args.stage)
    out = args.output or Path("profiles") / "adhoc" / f"{args.file.stem}.ncu-rep"
    req = ProfileRequest(code=code, problem=load_problem(args.problem), stage=stage, metric_set=args.metric_set,
                         out=out, timeout_s=args.timeout, device=args.device, clock_control=args.clock_control)
    prof = profile(req)
    c = console()
    c.print(profile_view(prof, stage))
    c.print(f"[dim]report {out}, metrics {out.with_suffix('.json')}, ncu took {prof.wall_s:.1f} s[/]")
    return 0


def prompts_command(args: argparse.Namespace) -> int:
    """Re-render each iteration's prompt of a recorded run and say whether it matches what was sent."""
    from agent.rerender import rerender_run
    from agent.store import Store
    from agent.view import console

    store = Store(args.root)
    if not store.exists():
        raise UserError(f"no runs recorded under {store.candidates_dir}")
    replayed = rerender_run(store, store.resolve_run(args.run))
    if args.format == "json":
        print(json.dumps([r.model_dump(mode="json") for r in replayed], indent=2))
        return 0
    if args.format == "prompt":
        for r in replayed:
            sys.stdout.write(f"===== iteration {r.iteration} ({r.stage}) =====\n{r.prompt}\n")
        return 0
    c = console()
    for r in replayed:
        same = "[green]identical to the prompt sent[/]" if r.matches else "[red]differs from the prompt sent[/]"
        c.print(f"[bold]iteration {r.iteration}[/] stage {r.stage}, best before: {r.best_before or '–'}; "
                f"{same}; why: {r.reason}")
    if not replayed:
        c.print("the run sent no prompts (only the starting kernel was evaluated)")
    return 0


def ncu_command(args: argparse.Namespace) -> int:
    from agent.ncu import diff, read_report, stage_metric_set
    from agent.view import console, diff_view, profile_view

    if args.report.is_dir():
        raise UserError(f"{args.report} is a directory, not a report (.ncu-rep)")
    if not args.report.is_file():
        raise UserError(f"no such report: {args.report}")
    if args.format == "sass":
        from agent.ncu.sass import read_sass
        from agent.view import console
        from agent.view.profiles import sass_view
        from agent.view.terminal import paged

        paged(console(), sass_view(read_sass(args.report)))
        return 0
    stage = find_stage(args.stage)
    metrics = stage_metric_set(stage)
    if args.format == "diagnosis":  # what the analyzers read beyond the stage's metrics, where the report has it
        from agent.diagnosis import DIAGNOSIS_METRICS

        metrics = [*metrics, *(m for m in DIAGNOSIS_METRICS if m not in metrics)]
    before = read_report(args.report, metrics)
    if args.diff is not None:
        after = read_report(args.diff, metrics)
        deltas = diff(before, after)
        if args.format == "json":
            print(json.dumps([d.model_dump(mode="json") for d in deltas], indent=2))
            return 0
        if args.format == "prompt":
            raise UserError("--format prompt shows one report; use table or json with --diff")
        c = console()
        c.print(diff_view(deltas, args.report, args.diff))
        for label, prof in (("before", before), ("after", after)):
            if prof.bottleneck:
                c.print(f"[bold]{label}:[/] {prof.bottleneck.reason}")
        return 0
    if args.format == "diagnosis":
        _diagnosis(before)
    elif args.format == "json":
        print(json.dumps(profile_json(before), indent=2))
    elif args.format == "prompt":
        from agent.prompts import format_metrics, stage_table

        # the block as prompts/partials/metrics.j2 renders it inside the stage's prompt
        sys.stdout.write(f"{METRICS_HEADER}\n{format_metrics(stage_table(before.table(), stage))}\n")
    else:
        console().print(profile_view(before, stage))
    return 0


def _diagnosis(profile) -> None:  # profile: agent.schema.Profile
    """The findings of one report, on the GPU it was recorded on (from the catalog), without a GPU here."""
    from rich.table import Table

    from agent.catalog import closest_gpu
    from agent.diagnosis import DiagnosisInput, diagnose
    from agent.view import console

    gpu = closest_gpu(profile.gpu) if profile.gpu else None
    # diagnose's own order: root causes by their one gain, each with the symptoms it explains under it; where the
    # kernel sits on the roofline after them (no gain of its own), then ncu's rules
    findings = diagnose(DiagnosisInput(profile=profile, gpu=gpu))
    table = Table(title=f"diagnosis ({gpu.name if gpu else 'GPU unknown'}): root causes by estimated gain, largest "
                        f"first, ↳ the symptoms each explains; then where the kernel sits; then ncu's own rules by "
                        f"their estimates (which overlap the causes)", title_justify="left")
    for col in ("finding", "kernel", "evidence", "direction", "gain"):
        table.add_column(col, justify="right" if col == "gain" else "left", no_wrap=col == "finding")
    for f in findings:
        gain = f"{f.gain_pct:.0f} %" if f.gain_pct else "–"
        table.add_row(f.kind, f.kernel, f.evidence, f.direction, f"ncu {gain}" if f.source == "ncu" else gain)
        for s in f.folded:
            table.add_row(f"  ↳ {s.kind}", s.kernel, s.evidence, "", "")
    console().print(table if findings else "no findings: nothing in this report stands out")


def replay_command(args: argparse.Namespace) -> int:
    """Saved profiles and prompts under one verb: a file (or a report's name) is a report, anything else a run id."""
    as_report = Path(args.target).is_file() or args.target.endswith((".ncu-rep", ".json", ".csv"))
    if as_report:
        args.report = Path(args.target)
        return ncu_command(args)
    args.run = args.target
    return prompts_command(args)


def find_stage(name: str) -> Stage:
    """A stage by name (agent.stages raises the UserError naming the choices)."""
    from agent.stages import get_stage

    return get_stage(name)


# ---------------------------------------------------------------- rendering


def profile_json(prof: Profile) -> dict:
    """{kernel: {metric: value}} plus "rules": {kernel: [rule, ...]} when the report has rule results."""
    out: dict = {name: dict(k.metrics) for name, k in prof.kernels.items()}
    rules = {name: [r.model_dump(mode="json") for r in k.rules] for name, k in prof.kernels.items() if k.rules}
    if rules:
        out["rules"] = rules
    return out
