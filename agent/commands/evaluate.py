"""`agent eval FILE`: run one answer (markdown or .py) through the harness and show its verdict.

Exit 0 whatever the verdict (the verdict is the output); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

_COLORS = {"correct": "green", "incorrect": "red", "timeout": "yellow"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate one candidate answer: verdict, checks, timing vs eager/compile",
                       description="Extract, check, run (sandboxed), validate against an fp64 truth and time one "
                                   "candidate. FILE is a raw LLM answer (markdown) or a .py file defining ModelNew.")
    p.add_argument("file", type=Path, metavar="FILE", help="the answer (markdown) or a .py file")
    p.add_argument("--problem", default="gap44", metavar="P", help="built-in problem name or a problem .py path (default: gap44)")
    p.add_argument("--stage", default="memory-fusion", metavar="S", help="stage whose rules apply (default: memory-fusion)")
    p.add_argument("--gpu", default="auto", metavar="NAME", help="target GPU label (timing always uses the local GPU)")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None,
                   help="where to run (default: cuda when available, else cpu with TRITON_INTERPRET=1)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="wall-clock limit for the candidate (s)")
    p.add_argument("--no-timing", action="store_true", help="validate only")
    p.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                   help="where baseline timings are cached (default: $XDG_CACHE_HOME/agent or ~/.cache/agent)")
    p.add_argument("--json", action="store_true", help="print the EvalResult as one JSON object")
    p.set_defaults(func=handle)


def _cache_dir() -> Path:
    import os

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agent"


def handle(args: argparse.Namespace) -> int:
    from agent.errors import UserError
    from agent.harness import EvalRequest, HarnessError, default_device, evaluate
    from agent.problems import load_problem

    if not args.file.is_file():
        raise UserError(f"file not found: {args.file}")
    try:
        source = args.file.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read {args.file}: {e}") from e
    problem = load_problem(args.problem)
    stage = _stage(args.stage)
    device = args.device or default_device()
    if device == "cuda" and default_device() != "cuda":
        raise UserError("--device cuda, but no CUDA device is available", hint="use --device cpu")
    if args.timeout is not None and args.timeout <= 0:
        raise UserError("--timeout must be positive")
    from agent.wiring import local_bandwidth

    req = EvalRequest(source=source, problem=problem, stage=stage, device=device, time_it=not args.no_timing,
                      cache_dir=args.cache_dir or _cache_dir(), bandwidth_gbs=local_bandwidth(device),
                      **({"timeout_s": args.timeout} if args.timeout else {}))
    try:
        result = evaluate(req)
    except HarnessError as e:
        raise UserError(str(e), hint="the problem's own Model failed; check the problem file") from e
    if args.json:
        print(json.dumps(result.model_dump(mode="json")))
    else:
        _render(result, problem.name, stage.name)
    return 0


def _stage(name: str):
    from agent.errors import UserError

    try:
        from agent.stages import get_stage
    except ImportError as e:
        raise UserError("stages are not available (agent.stages is missing)") from e
    return get_stage(name)


def _render(result, problem: str, stage: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=max(console.width, 120))
    color = _COLORS.get(result.verdict.value, "red")
    console.print(f"[bold {color}]{result.verdict.value}[/]  [dim]{problem} · {stage} · {result.device} · "
                  f"{result.duration_s:.1f} s[/]")
    console.print(result.message, markup=False)
    if result.kernels:
        console.print(f"[dim]kernels:[/] {', '.join(result.kernels)}")
    if result.checks:
        t = Table(title="checks", title_justify="left")
        for col in ("size", "inputs", "distribution", "error", "eager error", "tolerance", "ok", "note"):
            t.add_column(col, justify="right" if col in ("error", "eager error", "tolerance") else "left",
                         no_wrap=col != "note")
        for c in result.checks:
            note = c.note.replace("same buffer, new values", "same buffer").replace("new buffer, same shape", "new buffer")
            t.add_row(c.size, " ".join("x".join(map(str, s)) for s in c.shapes), c.distribution, _sci(c.error),
                      _sci(c.eager_error), _sci(c.tolerance), "[green]✓[/]" if c.passed else "[red]✗[/]", note)
        console.print(t)
    if result.timing:
        tm = result.timing
        t = Table(title="timing" + ("" if tm.meaningful else " (CPU mode: not meaningful)"), title_justify="left")
        for col in ("", "ms", "spread", "speedup"):
            t.add_column(col, justify="right")
        t.add_row("candidate", f"{tm.candidate_ms:.4g}", f"{tm.candidate_spread_pct:.1f}%", "")
        if tm.eager_ms is not None:
            t.add_row("eager", f"{tm.eager_ms:.4g}", _pct(tm.eager_spread_pct), _x(tm.speedup_vs_eager))
        if tm.compile_ms is not None:
            t.add_row("torch.compile", f"{tm.compile_ms:.4g}", _pct(tm.compile_spread_pct), _x(tm.speedup_vs_compile))
        console.print(t)
        if tm.note:
            console.print(f"[dim]{tm.note}[/]", markup=True)


def _sci(x: float | None) -> str:
    return "—" if x is None else f"{x:.2e}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}%"


def _x(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"
