"""`agent eval FILE|DIR ...`: run answers (markdown or .py) through the harness and show their verdicts.

One file: its verdict, checks and timing (`--json`: the EvalResult). Several, or a directory: every answer judged
(sharing one truth), a table and the suite's summary (agent.suite; `--json`: {"results": [...], "summary": ...}).
Exit 0 when every answer is correct, 3 when one is not (the verdicts are the output); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Literal

from agent.runconfig import DEFAULT_PROBLEM, DEFAULT_STAGE


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate candidate answers: verdicts, checks, timing vs eager/compile",
                       description="Extract, check, run (sandboxed), validate against an fp64 truth and time "
                                   "candidates. FILE is a raw LLM answer (markdown) or a .py file defining ModelNew; "
                                   "a DIR holds answers (*.md, *.py, *.txt). Exit 0 when all are correct, 3 if not.")
    p.add_argument("files", type=Path, nargs="+", metavar="FILE|DIR", help="answers (markdown or .py), or folders")
    p.add_argument("--problem", default=DEFAULT_PROBLEM, metavar="P",
                   help="built-in problem, shipped KernelBench look-alike (kb_42_...) or a problem .py path "
                        f"(default: {DEFAULT_PROBLEM})")
    p.add_argument("--stage", default=DEFAULT_STAGE, metavar="S",
                   help=f"stage whose rules apply (default: {DEFAULT_STAGE})")
    p.add_argument("--gpu", default="auto", metavar="NAME", help="target GPU label (timing always uses the local GPU)")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None,
                   help="where to run (default: cuda when available, else cpu with TRITON_INTERPRET=1)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="wall-clock limit for the candidate (default: scaled to the problem's eager time on a GPU)")
    p.add_argument("--objective", choices=["latency", "device", "energy"], default="latency",
                   help="the clock of the plain time and speedups (both clocks, and energy where measured, are "
                        "always shown; energy: the device clock's)")
    p.add_argument("--precision", choices=["fp32", "tf32", "kernelbench"], default="fp32",
                   help="the numerics the answer is held to: fp32 (default), tf32 (a tolerance floor of 2e-3) or "
                        "kernelbench (KernelBench's own check, to compare with published results: allclose with "
                        "atol=rtol=1e-2 on 5 draws of the problem's get_inputs() at its own sizes)")
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


NOT_ALL_CORRECT = 3


def _read(path: Path) -> str:
    """An answer's text, UTF-8 (what an LLM's reply is); ValueError naming the file where it is not."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:  # a ValueError: without this, its message would not say which answer
        raise ValueError(f"cannot read {path}: not UTF-8 text (byte {e.start}: {e.reason})") from None


def handle(args: argparse.Namespace) -> int:
    from agent.errors import UserError
    from agent.harness import EvalRequest, default_device, evaluate_many, prewarm_for
    from agent.problems import load_problem
    from agent.suite import answer_files

    try:
        files = answer_files(args.files)
        sources = [_read(f) for f in files]
    except ValueError as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"cannot read {getattr(e, 'filename', None) or 'an answer'}: {e}") from None
    guess = args.device or _likely_device()
    problem = load_problem(args.problem, guess)
    stage = _stage(args.stage)
    if args.timeout is not None and args.timeout <= 0:
        raise UserError("--timeout must be positive")
    base = EvalRequest(source="", problem=problem, stage=stage, device=guess,
                       time_it=not args.no_timing, cache_dir=args.cache_dir or _cache_dir(), timeout_s=args.timeout,
                       objective=args.objective, precision=args.precision)
    # the first worker imports torch and Triton while this process does the same for the checks (harness.prewarm)
    warm = prewarm_for(base, base.device or "cpu")
    try:
        device = args.device or default_device()
        if device == "cuda" and default_device() != "cuda":
            raise UserError("--device cuda, but no CUDA device is available", hint="use --device cpu")
        from agent.wiring import local_bandwidth

        if device != guess:  # a foreign file's sizes were checked for the other device
            base = base.model_copy(update={"problem": load_problem(args.problem, device)})
        base = base.model_copy(update={"device": device, "bandwidth_gbs": local_bandwidth(device)})
        results = evaluate_many([base.model_copy(update={"source": s}) for s in sources], warm={0: warm})
    finally:
        warm.cancel()  # unused (a wrong guess, an error above) or already finished: either way, gone
    single = len(args.files) == 1 and not args.files[0].is_dir()
    _print(args, files, results, problem.name, stage.name, single)
    return 0 if all(r.verdict.value == "correct" for r in results) else NOT_ALL_CORRECT


def _print(args: argparse.Namespace, files: list[Path], results: list, problem: str, stage: str, single: bool) -> None:
    from agent.suite import summarize

    if args.json:
        if single:
            print(json.dumps(results[0].model_dump(mode="json")))
        else:
            print(json.dumps({"results": [{"file": str(f), **r.model_dump(mode="json")} for f, r in zip(files, results)],
                              "summary": summarize(results).model_dump(mode="json")}))
        return
    from agent.view import console, eval_view, suite_view

    console().print(eval_view(results[0], problem, stage, answer=str(files[0])) if single else
                    suite_view(files, results, summarize(results), problem, stage, args.objective))


def _likely_device() -> Literal["cuda", "cpu"]:
    """Where `default_device` will say, guessed without importing torch (a wrong guess costs the early worker)."""
    import os

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "cuda" if Path("/dev/nvidiactl").exists() and visible not in ("", "-1") else "cpu"


def _stage(name: str):

    from agent.stages import get_stage

    return get_stage(name)
