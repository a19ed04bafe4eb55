"""`agent run`: parse flags into a RunConfig, build the parts (agent.wiring), hand them to agent.loop.run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agent.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="optimize a problem's hot path: render → propose → evaluate → profile → record",
                       description="Run the optimization loop for one stage (or --stage auto: walk the stage "
                                   "ladder by bottleneck). Everything is recorded under --root.")
    p.add_argument("--stage", default="memory-fusion", metavar="STAGE|auto", help="stage to run, or auto")
    p.add_argument("--problem", default="gap44", metavar="NAME|PATH", help="built-in problem or KernelBench-style file")
    p.add_argument("--gpu", default="auto", metavar="auto|NAME", help="target GPU for the prompt (default: detect)")
    p.add_argument("--iterations", type=int, default=5, metavar="N", help="iterations after the starting kernel")
    p.add_argument("--samples", type=int, default=4, metavar="K", help="candidates per iteration")
    p.add_argument("--llm", default=None, metavar="openai|offline|replay:RUN_ID",
                   help="proposer (default: openai when OPENAI_API_KEY is set, else offline)")
    p.add_argument("--model", default="gpt-4o", help="model name for --llm openai")
    p.add_argument("--budget-usd", type=float, default=None, metavar="X", help="stop before spending more than X")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None,
                   help="cuda, or cpu (TRITON_INTERPRET=1, reduced sizes); default: cuda when available")
    p.add_argument("--patience", type=int, default=3, metavar="N", help="stop (or, with auto, move on) after N "
                   "iterations without improvement")
    p.add_argument("--timeout", type=float, default=180.0, metavar="S", help="per-candidate wall-clock limit")
    p.add_argument("--seed", type=int, default=0, help="seed for weights and validation inputs")
    p.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run")
    p.add_argument("--root", type=Path, default=Path("."), metavar="DIR",
                   help="directory holding candidates/ and profiles/ (default: the current directory)")
    where = p.add_mutually_exclusive_group()  # agent.scale: evaluate on several GPUs / a Ray cluster
    where.add_argument("--gpus", metavar="all|0,1,...", help="one evaluation worker per GPU of this host")
    where.add_argument("--cluster", metavar="ray://HOST:PORT|auto|local",
                       help="evaluation workers as Ray actors, one per GPU of the cluster (pip install -e '.[ray]')")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--quiet", action="store_true", help="print only the final summary")
    out.add_argument("--json", action="store_true", help="JSON lines of events, then a JSON summary")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agent import loop, wiring
    from agent.catalog import resolve_gpu
    from agent.harness import default_device
    from agent.scale import cluster_device as scale_device, plan as scale_plan, scaled_parts
    from agent.problems import load_problem
    from agent.schema import RunConfig
    from agent.stages import get_stage
    from agent.store import Store
    from agent.view import LiveProgress, leaderboard_fitting, run_summary

    _positive(args.iterations, "--iterations", zero_ok=True)
    _positive(args.samples, "--samples")
    store = Store(args.root)
    if args.resume:
        run_id = store.resolve_run(args.resume)
        record = store.get_run(run_id)
        if record.status == "running":  # its process is alive: two loops must not write one run
            raise UserError(f"run {run_id} is still running (pid {record.pid} on {record.host})",
                            "stop it first, or wait for it to finish")
        config = record.config
    else:
        if args.stage != "auto":
            get_stage(args.stage)  # unknown stage: one line naming the choices
        problem = load_problem(args.problem)
        device = args.device or (scale_device(args.cluster) if args.cluster else default_device())
        if device == "cuda" and not args.cluster and default_device() != "cuda":
            raise UserError("--device cuda but no CUDA GPU is visible", "use --device cpu for CPU mode")
        config = RunConfig(problem=args.problem, stage=args.stage, gpu=args.gpu, iterations=args.iterations,
                           samples=args.samples, llm=args.llm or wiring.default_llm(), model=args.model,
                           budget_usd=args.budget_usd, device=device, patience=args.patience,
                           timeout_s=args.timeout, seed=args.seed, root=args.root)
        run_id = None
    wiring.check_llm(config.llm, store)  # a bad --llm is one line, before any other output
    problem = load_problem(config.problem)
    gpu = resolve_gpu(config.gpu)
    scaled = scale_plan(args.gpus, args.cluster, config.device) if args.gpus or args.cluster else None
    # The proposer is built before the run is created or reopened: a missing key leaves no empty run behind.
    calls = wiring.CallLog(store, run_id)
    proposer = wiring.build_proposer(config, problem, gpu, store, calls, resumed=run_id)
    mode = "quiet" if args.quiet else "json" if args.json else "auto"

    with LiveProgress(mode, total_iterations=config.iterations) as progress:
        if run_id is None:
            run_id = store.create_run(config, gpu=gpu.name, device=config.device)
        else:
            store.reopen_run(run_id)
        calls.run_id = run_id
        if config.llm == "offline" and args.llm is None and not args.resume:
            progress.message("no OPENAI_API_KEY: using the embedded offline proposer (no LLM)")
        progress.message(f"run {run_id}: {problem.name} on {config.device} (target {gpu.name}), stage {config.stage}, "
                         f"{config.iterations} iterations × {config.samples} samples, proposer {proposer.name}")
        if scaled:
            evaluator, profiler = scaled_parts(scaled, problem, config, store, run_id, progress)
        else:
            evaluator = wiring.HarnessEvaluator(problem, config.device, config.timeout_s,
                                                cache_dir=store.root / "candidates" / ".cache", seed=config.seed,
                                                hide=[store.root], bandwidth_gbs=wiring.local_bandwidth(config.device))
            profiler = wiring.NcuProfiler(problem, store, run_id, config.device, on_error=progress.message)
        try:
            outcome = loop.run(config, run_id, problem=problem, gpu=gpu, proposer=proposer, evaluator=evaluator,
                               profiler=profiler, store=store, progress=progress)
        except KeyboardInterrupt:
            store.finish_run(run_id, "interrupted")
            raise UserError("interrupted; nothing finished is lost", f"continue with: agent run --resume {run_id}")
        except BaseException:
            store.finish_run(run_id, "failed")
            raise
        finally:
            close = getattr(proposer, "close", None)
            if close:
                close()
            if scaled:
                evaluator.close()

    top = store.leaderboard(run=run_id, limit=5)
    if args.json:
        print(json.dumps({"run": run_id, "stop_reason": outcome.stop_reason, "iterations": outcome.iterations,
                          "best": outcome.best.candidate if outcome.best else None,
                          "error": outcome.error, "usage": outcome.usage.model_dump(),
                          "leaderboard": [r.model_dump(mode="json") for r in top]}))
        return _failed(run_id, outcome.error)
    from rich.console import Console

    console = Console()
    console.print(run_summary(store.get_run(run_id)))
    if top:
        console.print(leaderboard_fitting(top, console, title="Top candidates"))
    console.print(f"stopped: {outcome.stop_reason}")
    if scaled:
        console.print(evaluator.summary())
    if outcome.best:
        console.print(f"best: [bold]{outcome.best.candidate}[/] ({outcome.best.ms:.3f} ms); "
                      f"export with: agent export {outcome.best.candidate} -o kernel.py")
    return _failed(run_id, outcome.error)


def _failed(run_id: str, error: str | None) -> int:
    """A run that ended on a failure (not a limit) exits non-zero, after everything it finished is shown."""
    if error:
        raise UserError(f"run {run_id} stopped early: {error}", f"fix it, then: agent run --resume {run_id}")
    return 0


def _positive(value: int, flag: str, zero_ok: bool = False) -> None:
    if value < 0 or (value == 0 and not zero_ok):
        raise UserError(f"{flag} must be {'≥ 0' if zero_ok else '≥ 1'}, got {value}")
