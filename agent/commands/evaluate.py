"""`agent eval FILE`: run one answer (markdown or .py) through the harness and show its verdict.

Exit 0 whatever the verdict (the verdict is the output); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Literal


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
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="wall-clock limit for the candidate (default: scaled to the problem's eager time on a GPU)")
    p.add_argument("--objective", choices=["latency", "device"], default="latency",
                   help="the clock of the plain time and speedups (both clocks are always shown)")
    p.add_argument("--no-timing", action="store_true", help="validate only")
    p.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                   help="where truths and baselines are kept across runs (default: $XDG_CACHE_HOME/agent or "
                        "~/.cache/agent)")
    p.add_argument("--json", action="store_true", help="print the EvalResult as one JSON object")
    p.set_defaults(func=handle)


def _cache_dir() -> Path:
    import os

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agent"


def handle(args: argparse.Namespace) -> int:
    from agent.errors import UserError
    from agent.harness import EvalRequest, default_device, evaluate, prewarm_for
    from agent.problems import load_problem

    if not args.file.is_file():
        raise UserError(f"file not found: {args.file}")
    try:
        source = args.file.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read {args.file}: {e}") from e
    problem = load_problem(args.problem)
    stage = _stage(args.stage)
    if args.timeout is not None and args.timeout <= 0:
        raise UserError("--timeout must be positive")
    req = EvalRequest(source=source, problem=problem, stage=stage, device=args.device or _likely_device(),
                      time_it=not args.no_timing, cache_dir=args.cache_dir or _cache_dir(), timeout_s=args.timeout,
                      objective=args.objective)
    # the worker imports torch and Triton while this process does the same for the checks (agent.harness.prewarm)
    warm = prewarm_for(req, req.device or "cpu")
    try:
        device = args.device or default_device()
        if device == "cuda" and default_device() != "cuda":
            raise UserError("--device cuda, but no CUDA device is available", hint="use --device cpu")
        from agent.wiring import local_bandwidth

        req = req.model_copy(update={"device": device, "bandwidth_gbs": local_bandwidth(device)})
        result = evaluate(req, warm=warm)
    finally:
        warm.cancel()  # unused (a wrong guess, an error above) or already finished: either way, gone
    if args.json:
        print(json.dumps(result.model_dump(mode="json")))
    else:
        from agent.view import console, eval_view

        console().print(eval_view(result, problem.name, stage.name))
    return 0


def _likely_device() -> Literal["cuda", "cpu"]:
    """Where `default_device` will say, guessed without importing torch (a wrong guess costs the early worker)."""
    import os

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "cuda" if Path("/dev/nvidiactl").exists() and visible not in ("", "-1") else "cpu"


def _stage(name: str):

    from agent.stages import get_stage

    return get_stage(name)
