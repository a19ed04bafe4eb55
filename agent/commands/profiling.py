"""CLI commands for Nsight Compute profiles: `agent profile` (run ncu) and `agent replay` (read a saved report).

`agent replay REPORT.ncu-rep --format json` prints one object: each kernel name maps to {metric: value} (the
stage's metric set, as read), and, for full reports, the key "rules" maps each kernel name to its list of
guided-analysis results ({rule, title, kind, message, estimated_speedup_pct}). With --diff B.ncu-rep it prints
a JSON list of {kernel, metric, before, after, delta, pct, direction} instead.

Imports of the profiling modules happen inside handlers so `agent --help` stays light.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agent.errors import UserError

if TYPE_CHECKING:
    from rich.console import RenderableType

    from agent.ncu import MetricDelta
    from agent.schema import Profile, Stage

DEFAULT_STAGE = "memory-fusion"
METRICS_HEADER = "[NCU PROFILING METRICS]"
_DIRECTION_STYLE = {"better": "green", "worse": "red", "same": "dim", "neutral": "yellow"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="profile a candidate's Triton kernels with Nsight Compute (needs a GPU)",
                       description="Run a candidate under ncu (in the harness sandbox, after warm-up, only its own "
                                   "Triton kernels) and save the .ncu-rep with its parsed metrics as JSON beside it.")
    p.add_argument("file", type=Path, metavar="FILE", help="the candidate: a .py module or a raw LLM answer")
    p.add_argument("--problem", default="gap44", metavar="P", help="built-in problem name or path (default: gap44)")
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

    p = sub.add_parser("replay", help="show a saved .ncu-rep as a table, JSON or the prompt's metrics block",
                       description="Read a saved Nsight Compute report (no GPU needed): a table per kernel with "
                                   "the stage's metrics, rule results and the bottleneck; JSON; or the exact "
                                   "[NCU PROFILING METRICS] block. --diff compares it with a second report.")
    p.add_argument("target", metavar="REPORT|RUN_ID", help="a .ncu-rep file, or a run id to re-render its prompts")
    p.add_argument("--root", type=Path, default=Path("."), metavar="DIR",
                   help="with RUN_ID: directory holding candidates/ (default: the current directory)")
    p.add_argument("--format", choices=("table", "json", "prompt"), default="table", help="output format (default: table)")
    p.add_argument("--stage", default=DEFAULT_STAGE, metavar="S", help=f"stage whose metrics to show (default: {DEFAULT_STAGE})")
    p.add_argument("--diff", type=Path, metavar="B.ncu-rep", help="compare with this report: before=REPORT, after=B")
    p.set_defaults(func=replay_command)


# ---------------------------------------------------------------- handlers


def profile_command(args: argparse.Namespace) -> int:
    from agent.harness.extract import extract_code, why_no_code
    from agent.problems import load_problem
    from agent.profiler import ProfileRequest, profile

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
    console = _console()
    console.print(profile_view(prof, stage))
    console.print(f"[dim]report {out}, metrics {out.with_suffix('.json')}, ncu took {prof.wall_s:.1f} s[/]")
    return 0


def _replay_run(args: argparse.Namespace) -> int:
    """Re-render each iteration's prompt of a recorded run and say whether it matches what was sent."""
    from agent.replay import rerender_run
    from agent.store import Store

    store = Store(args.root)
    if not store.exists() or target_looks_like_file(args.target):
        raise UserError(f"no such report or run: {args.target}")
    replayed = rerender_run(store, args.target)
    if args.format == "json":
        print(json.dumps([r.model_dump(mode="json") for r in replayed], indent=2))
        return 0
    if args.format == "prompt":
        for r in replayed:
            sys.stdout.write(f"===== iteration {r.iteration} ({r.stage}) =====\n{r.prompt}\n")
        return 0
    console = _console()
    for r in replayed:
        same = "[green]identical to the prompt sent[/]" if r.matches else "[red]differs from the prompt sent[/]"
        console.print(f"[bold]iteration {r.iteration}[/] stage {r.stage}, best before: {r.best_before or '–'}; "
                      f"{same}; why: {r.reason}")
    if not replayed:
        console.print("the run sent no prompts (only the starting kernel was evaluated)")
    return 0


def target_looks_like_file(target: str) -> bool:
    return target.endswith((".ncu-rep", ".json", ".csv")) or "/" in target


def replay_command(args: argparse.Namespace) -> int:
    from agent.ncu import diff, prompt_table, read_report, stage_metric_set

    target = Path(args.target)
    if not target.is_file():
        return _replay_run(args)
    stage = find_stage(args.stage)
    metrics = stage_metric_set(stage)
    before = read_report(target, metrics)
    if args.diff is not None:
        after = read_report(args.diff, metrics)
        deltas = diff(before, after)
        if args.format == "json":
            print(json.dumps([d.model_dump(mode="json") for d in deltas], indent=2))
        else:
            if args.format == "prompt":
                raise UserError("--format prompt shows one report; use table or json with --diff")
            console = _console()
            console.print(diff_view(deltas, target, args.diff))
            for label, prof in (("before", before), ("after", after)):
                if prof.bottleneck:
                    console.print(f"[bold]{label}:[/] {prof.bottleneck.reason}")
        return 0
    if args.format == "json":
        print(json.dumps(profile_json(before), indent=2))
    elif args.format == "prompt":
        from agent.prompts import format_metrics

        # the block as prompts/partials/metrics.j2 renders it inside the stage's prompt
        sys.stdout.write(f"{METRICS_HEADER}\n{format_metrics(prompt_table(before, stage))}\n")
    else:
        _console().print(profile_view(before, stage))
    return 0


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


def fmt_metric(name: str, value: float | int) -> str:
    """Durations in µs, integers as integers, everything else with two decimals (as the prompt rounds)."""
    if name.startswith("gpu__time_duration"):
        return f"{value / 1e3:,.1f} µs"
    if isinstance(value, int) or float(value).is_integer() and name.startswith("launch__"):
        return f"{int(value):,}"
    return f"{value:,.2f}"


def profile_view(prof: Profile, stage: Stage) -> RenderableType:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from agent.ncu import DURATION, metric_info, stage_metric_set

    parts: list = [Text.from_markup(f"[bold]{prof.report or 'profile'}[/]  [dim]{prof.gpu or 'unknown GPU'}, "
                                    f"{prof.metric_set} set, stage {stage.name}[/]")]
    shown = stage_metric_set(stage)
    for name, k in prof.kernels.items():
        t = Table(title=f"[bold]{name}[/]", title_justify="left", show_header=True, header_style="bold")
        t.add_column("metric")
        t.add_column("name", style="dim")
        t.add_column("value", justify="right")
        dims = lambda d: "×".join(str(x) for x in d) if d else "—"  # noqa: E731
        t.add_row("grid × block", "launch__grid_dim / block_dim", f"{dims(k.grid)} × {dims(k.block)}")
        t.add_row("launches", "", str(k.launches))
        for metric in shown:
            value = k.metrics.get(metric)
            label = metric_info(metric).label if metric_info(metric).label != metric else ""
            text = fmt_metric(metric, value) if value is not None else "[dim]not in report[/]"
            if metric == DURATION and value is not None and k.launches > 1:
                text += f" ({fmt_metric(metric, value / k.launches)} per launch)"
            t.add_row(label, metric, text)
        parts.append(t)
        if k.rules:
            r = Table(title=f"guided analysis: {name}", title_justify="left", show_lines=True, header_style="bold")
            r.add_column("rule")
            r.add_column("kind")
            r.add_column("est. speedup", justify="right")
            r.add_column("message", ratio=1)
            for rule in k.rules:
                style = {"optimization": "yellow", "warning": "magenta", "error": "red", "ok": "green"}.get(rule.kind, "")
                speedup = f"{rule.estimated_speedup_pct:.1f} %" if rule.estimated_speedup_pct is not None else ""
                r.add_row(f"{rule.title}\n[dim]{rule.rule}[/]", Text(rule.kind, style=style), speedup, rule.message)
            parts.append(r)
    if prof.bottleneck:
        parts.append(Text.from_markup(f"[bold]bottleneck:[/] {prof.bottleneck.reason}"))
    return Group(*parts)


def diff_view(deltas: list[MetricDelta], before: Path, after: Path) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    from agent.ncu import metric_info

    t = Table(title=f"{before} → {after}", title_justify="left", header_style="bold")
    for col, justify in (("kernel", "left"), ("metric", "left"), ("before", "right"), ("after", "right"),
                         ("delta", "right"), ("change", "right"), ("direction", "left")):
        t.add_column(col, justify=justify)  # type: ignore[arg-type]
    for d in deltas:
        label = metric_info(d.metric).label
        fmt = lambda v: fmt_metric(d.metric, v) if v is not None else "—"  # noqa: E731
        delta = "—" if d.delta is None else ("+" if d.delta > 0 else "") + fmt(d.delta)
        pct = "—" if d.pct is None else f"{d.pct:+.1f} %"
        t.add_row(d.kernel, label if label != d.metric else d.metric, fmt(d.before), fmt(d.after), delta, pct,
                  Text(d.direction, style=_DIRECTION_STYLE[d.direction]))
    return t


def _console():
    """Rich console; piped output gets a wide page so tables keep every column."""
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 160, highlight=False)
