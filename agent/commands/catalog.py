"""CLI commands over the static parts: `agent gpus`, `agent stages`, `agent problems`, `agent render`.

Nothing heavy at import time: torch is imported only by `--gpu auto` detection (and by problem files given as paths).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent.runconfig import DEFAULT_PROBLEM, DEFAULT_STAGE

from agent.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gpus", help="list the GPU catalog (the detected GPU is marked)",
                       description="List the GPU catalog; the GPU `--gpu auto` would target is marked.")
    p.set_defaults(func=gpus_command)

    p = sub.add_parser("stages", help="list the optimization stages: focus and ncu metrics, in ladder order",
                       description="List the stage ladder: each stage's focus, the ncu metrics its prompt shows, "
                                   "and its static rules.")
    p.set_defaults(func=stages_command)

    p = sub.add_parser("problems", help="list the problems --problem accepts: description, sizes, starting kernel",
                       description="List every problem --problem accepts by name (the built-in ones, then the "
                                   "KernelBench level-2 look-alikes kb_*) with their validation sizes (GPU and CPU "
                                   "mode); --problem also takes the path of any KernelBench-style file.")
    p.set_defaults(func=problems_command)

    p = sub.add_parser("rules", help="list the rules a verdict can name, where each lives and what it refuses",
                       description="List the judge's rules (agent/data/rules.toml): a refusal's message ends with "
                                   "its rule's [id]; `agent rules ID` shows that rule's file and data.")
    p.add_argument("id", nargs="?", help="one rule's id (as in a verdict's message)")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(func=rules_command)

    p = sub.add_parser("render", help="print a stage's prompt for a GPU, problem, code and metrics",
                       description="Render a stage prompt to stdout, byte for byte as the agent sends it.")
    p.add_argument("--stage", default=DEFAULT_STAGE, metavar="S", help=f"stage name (default: {DEFAULT_STAGE})")
    p.add_argument("--gpu", default="auto", metavar="NAME", help="catalog GPU, or auto to detect (default: auto)")
    p.add_argument("--problem", default=DEFAULT_PROBLEM, metavar="NAME|PATH",
                   help=f"built-in problem or a KernelBench-style file (default: {DEFAULT_PROBLEM})")
    p.add_argument("--code", type=Path, metavar="FILE", help="current code (default: the problem's starting kernel)")
    p.add_argument("--metrics", type=Path, metavar="FILE", help="{kernel: {metric: value}} JSON or a .ncu-rep report")
    p.add_argument("--feedback", type=Path, metavar="FILE.json",
                   help='earlier attempts: JSON list of {"candidate", "verdict", "message"}')
    p.add_argument("--diagnosis", choices=("on", "off"), default="on",
                   help="a [DIAGNOSIS] block of findings from --metrics (default: on; off renders the seed's shape)")
    p.set_defaults(func=render_command)


# ---------------------------------------------------------------- handlers


def gpus_command(args: argparse.Namespace) -> int:
    import logging

    from agent.catalog import FALLBACK, closest_gpu, detect_device_name, load_catalog
    from agent.view import console, gpu_table
    from agent.view.catalog import GPU_FORMS, fitting

    logging.getLogger("agent.catalog").setLevel(logging.ERROR)  # the table says it; no warning line on top
    device = detect_device_name()
    target = closest_gpu(device).key if device else FALLBACK
    caption = f"detected: {device}" if device else f"no CUDA device detected: --gpu auto targets {FALLBACK}"
    out = console()
    gpus = load_catalog()
    out.print(fitting(out, *(gpu_table(gpus, target, caption, shown=form) for form in GPU_FORMS)))
    return 0


def stages_command(args: argparse.Namespace) -> int:
    from agent.stages import load_stages
    from agent.view import console, ladder_table

    console().print(ladder_table(load_stages()))
    return 0


def problems_command(args: argparse.Namespace) -> int:
    from agent.problems import list_problems, load_problem, lookalikes
    from agent.view import console, problem_table

    # every name --problem accepts: the built-in ones, then the KernelBench look-alikes (sizes derived from the file)
    console().print(problem_table([*list_problems(), *(load_problem(p.stem) for p in lookalikes())]))
    return 0


def rules_command(args: argparse.Namespace) -> int:
    from agent.ruleindex import get_rule, rules
    from agent.view import console
    from agent.view.catalog import rules_table

    chosen = [get_rule(args.id)] if args.id else list(rules().values())
    if args.json:
        print(json.dumps([r.model_dump() for r in chosen], indent=1))
    elif args.id:
        r = chosen[0]
        print(f"{r.id} ({r.room}): {r.refuses}\n  file: {r.file}" + (f"\n  data: {r.data}" if r.data else ""))
    else:
        console().print(rules_table(chosen))
    return 0


def render_command(args: argparse.Namespace) -> int:
    from agent.catalog import resolve_gpu
    from agent.problems import load_problem, starting_code
    from agent.prompts import PromptInput, render
    from agent.stages import get_stage

    # Every input is checked before the GPU is resolved: `--gpu auto` on a machine without one logs a warning,
    # and a bad input should get one error line, not a warning and then the error.
    stage = get_stage(args.stage)
    problem = load_problem(args.problem)
    code = _read(args.code, "code") if args.code is not None else starting_code(problem)
    if code is None:
        raise UserError(f"problem {problem.name} has no starting kernel", "pass --code FILE")
    profile = _profile(args.metrics, stage) if args.metrics is not None else None
    feedback = _feedback(args.feedback) if args.feedback is not None else []
    gpu = resolve_gpu(args.gpu, warn=False)  # the prompt names its target GPU in its first lines
    findings = []
    if profile is not None and args.diagnosis == "on":
        from agent.diagnosis import for_prompt

        # a JSON table says nothing of where it was measured: it is read on the target GPU
        findings = for_prompt(profile if profile.gpu else profile.model_copy(update={"gpu": gpu.name}), None)
    prompt = render(PromptInput(stage=stage, gpu=gpu, code=code, metrics=profile.table() if profile else {},
                                feedback=feedback, reference=problem.path.read_text(encoding="utf-8"),
                                diagnosis=findings))
    sys.stdout.write(prompt)  # not rich: the bytes must be exactly the prompt's
    sys.stdout.flush()
    return 0


# ---------------------------------------------------------------- inputs


def _read(path: Path, what: str) -> str:
    if path.is_dir():
        raise UserError(f"{what} file {path} is a directory, not a file")
    if not path.is_file():
        raise UserError(f"{what} file not found: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read {what} file {path}: {e}") from None


def _profile(path: Path, stage):  # -> agent.schema.Profile
    """A report as read for the stage, or a `{kernel: {metric: value}}` JSON table as a profile without a GPU."""
    from agent.prompts import load_metrics_json
    from agent.schema import KernelProfile, Profile

    if path.is_dir():
        raise UserError(f"metrics file {path} is a directory, not a file")
    if not path.is_file():
        raise UserError(f"metrics file not found: {path}")
    if path.suffix == ".ncu-rep":
        from agent.diagnosis import DIAGNOSIS_METRICS
        from agent.ncu import read_report

        # as the loop's profiler reads it: the stage's metrics for the metrics block (render keeps only those), and
        # what the diagnosis reads beyond them for the [DIAGNOSIS] block
        return read_report(path, [*stage.metrics, *(m for m in DIAGNOSIS_METRICS if m not in stage.metrics)])
    table = load_metrics_json(path)
    return Profile(kernels={k: KernelProfile(name=k, metrics=dict(m)) for k, m in table.items()})


def _feedback(path: Path):
    from pydantic import TypeAdapter, ValidationError

    from agent.schema import Feedback

    text = _read(path, "feedback")
    try:
        return TypeAdapter(list[Feedback]).validate_python(json.loads(text))
    except json.JSONDecodeError as e:
        raise UserError(f"feedback file {path} is not valid JSON: {e.msg} at line {e.lineno}") from None
    except ValidationError as e:
        first = e.errors()[0]
        where = "/".join(str(p) for p in first["loc"]) or "top level"
        raise UserError(f"feedback file {path} must be a list of {{candidate, verdict, message}}; at {where}: "
                        f"{first['msg']}") from None
