"""`agent run`: parse flags into a RunConfig, build the parts (agent.wiring), hand them to agent.loop.run."""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path
from typing import Literal

from agent import wiring
from agent.errors import Interrupted, UserError
from agent.printable import printable
from agent.plural import count


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="optimize a problem's hot path: render → propose → evaluate → profile → record",
                       description="Run the optimization loop for one stage (or --stage auto: walk the stage "
                                   "ladder by bottleneck). Everything is recorded under --root.")
    p.add_argument("--stage", metavar="STAGE|auto", help="stage to run, or auto (default: memory-fusion)")
    p.add_argument("--problem", metavar="NAME|PATH", help="built-in problem, shipped KernelBench look-alike "
                   "(kb_42_...) or KernelBench-style file (default: gap44)")
    p.add_argument("--gpu", metavar="auto|NAME", help="target GPU for the prompt (default: auto, detect)")
    p.add_argument("--iterations", type=int, metavar="N", help="iterations after the starting kernel (default: 5; with "
                   "--resume: raise it to go on)")
    p.add_argument("--samples", type=int, metavar="K", help="candidates per iteration (default: 4)")
    p.add_argument("--llm", default=None, metavar=wiring.llm_choices("|"),
                   help="proposer (default: openai when OPENAI_API_KEY is set, else offline)")
    p.add_argument("--model", help="model name for --llm openai (default: gpt-4o)")
    p.add_argument("--llm-timeout", type=float, metavar="S", help="seconds to wait for one model call (default: 300)")
    p.add_argument("--llm-retries", type=int, metavar="N", help="retries of a model call that timed out, was rate "
                   "limited or failed with 5xx (default: 4)")
    p.add_argument("--budget-usd", type=float, default=None, metavar="X", help="stop before spending more than X")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None,
                   help="cuda, or cpu (TRITON_INTERPRET=1, reduced sizes); default: cuda when available")
    p.add_argument("--patience", type=int, metavar="N", help="stop (or, with auto, move on) after N (default: 3) "
                   "iterations without improvement")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="per-candidate wall-clock limit (default: scaled to the problem's eager time on a GPU)")
    p.add_argument("--objective", choices=["latency", "device", "energy"],
                   help="what candidates are ranked by: latency (a synchronized call, host included; default), "
                        "device (GPU time of calls queued back to back) or energy (the GPU's energy per call, from "
                        "NVML; where it cannot be measured, latency)")
    p.add_argument("--precision", choices=("fp32", "tf32", "kernelbench"), help="the numerics candidates are held "
                   "to: fp32 (default: a tolerance of max(1e-4, 4x eager's own error vs fp64)), tf32 (a floor of "
                   "2e-3: TF32 products, as cuDNN and torch.compile's channels-last convolutions use under PyTorch's "
                   "defaults; torch.compile's answer is held to the same) or kernelbench (KernelBench's own check, "
                   "to compare with published results: allclose with atol=rtol=1e-2 on 5 draws of the problem's "
                   "get_inputs() at its own sizes)")
    p.add_argument("--seed", type=int, help="seed for weights and validation inputs (default: 0)")
    p.add_argument("--diagnosis", choices=("on", "off"), help="a [DIAGNOSIS] block of findings from the current "
                   "best's profile and clocks in every prompt (default: on)")
    p.add_argument("--start", choices=("problem", "inductor", "both"), help="iteration 0's answers: the problem's "
                   "starting kernel, torch.compile's own kernels made into an answer (GPU only: captured in a "
                   "sandboxed worker at the problem's sizes), or both (default: problem)")
    p.add_argument("--search", choices=("greedy", "beam", "tree"), help="where each sample of a round starts from: "
                   "greedy (the run's best), beam (the --beam best distinct candidates; default), tree (a UCT score of "
                   "each candidate's gain and how little it was explored: README)")
    p.add_argument("--beam", type=int, metavar="B", help="--search beam: how many of the best distinct candidates "
                   "are parents (default: 3)")
    p.add_argument("--memory", choices=("on", "off"), help="a [MEMORY] block of what the run tried and what came of "
                   "it in every prompt (default: on)")
    p.add_argument("--max-candidates", type=int, metavar="N", help="stop once N proposals were judged (a round is "
                   "cut to fit; with --resume: change it)")
    p.add_argument("--max-minutes", type=float, metavar="M", help="start no round after M minutes of this command "
                   "(a running round finishes; with --resume: change it)")
    p.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run")
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="directory holding candidates/ and profiles/ (default: the config's store.root, else the "
                        "nearest folder at or above here holding one, else .)")
    where = p.add_mutually_exclusive_group()  # agent.scale: evaluate on several GPUs / a Ray cluster
    where.add_argument("--gpus", metavar="all|0,1,...", help="one evaluation worker per GPU of this host")
    where.add_argument("--cluster", metavar="ray://HOST:PORT|auto|local",
                       help="evaluation workers as Ray actors, one per GPU of the cluster (pip install -e '.[ray]')")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--quiet", action="store_true", help="print only the final summary")
    out.add_argument("--json", action="store_true", help="JSON lines of events, then a JSON summary")
    p.set_defaults(func=run)


MAX_SAMPLES = 256
# What a new run gets for a flag not given. A resumed run keeps its own values: these may change on --resume (go on
# for more iterations, a bigger budget) and the others may not (they define what the run measures).
DEFAULTS = {"stage": "memory-fusion", "problem": "gap44", "gpu": "auto", "iterations": 5, "samples": 4,
            "model": "gpt-4o", "patience": 3, "objective": "latency", "precision": "fp32", "seed": 0, "llm_timeout": 300.0,
            "llm_retries": 4, "diagnosis": "on", "start": "problem", "search": "beam", "beam": 3, "memory": "on"}
RESUMABLE = {"iterations": "iterations", "samples": "samples", "patience": "patience", "budget_usd": "budget_usd",
             "timeout": "timeout_s", "llm_timeout": "llm_timeout_s", "llm_retries": "llm_retries",
             "max_candidates": "max_candidates", "max_minutes": "max_minutes"}
FIXED = {"problem": "problem", "stage": "stage", "gpu": "gpu", "model": "model", "llm": "llm", "device": "device",
         "objective": "objective", "precision": "precision", "seed": "seed", "diagnosis": "diagnosis", "start": "start", "search": "search",
         "beam": "beam", "memory": "memory"}
MAX_BEAM = 64


def run(args: argparse.Namespace) -> int:
    from agent import loop
    from agent.config import UserConfig
    from agent.view import LiveProgress
    from agent.view.progress import Mode

    user: UserConfig = getattr(args, "user", None) or UserConfig()
    if not args.resume:  # a flag wins over the user's config (agent.config), which wins over the built-in default
        for key, value in {**DEFAULTS, **user.run.model_dump(exclude_none=True)}.items():
            if getattr(args, key) is None:
                setattr(args, key, value)
    if args.iterations is not None:
        _positive(args.iterations, "--iterations", zero_ok=True)
    if args.samples is not None:
        _positive(args.samples, "--samples")
    if args.patience is not None:
        _positive(args.patience, "--patience")
    if args.samples is not None and args.samples > MAX_SAMPLES:  # each one is an LLM answer and a sandboxed evaluation
        raise UserError(f"--samples {args.samples}: at most {MAX_SAMPLES} candidates per iteration")
    if args.timeout is not None and not args.timeout > 0:
        raise UserError(f"--timeout must be > 0 seconds, got {args.timeout:g}")
    if args.llm_timeout is not None and not args.llm_timeout > 0:
        raise UserError(f"--llm-timeout must be > 0 seconds, got {args.llm_timeout:g}")
    if args.llm_retries is not None:
        _positive(args.llm_retries, "--llm-retries", zero_ok=True)
    if args.budget_usd is not None and not args.budget_usd > 0:
        raise UserError(f"--budget-usd must be > 0, got {args.budget_usd:g}")
    if args.beam is not None:
        _positive(args.beam, "--beam")
        if args.beam > MAX_BEAM:
            raise UserError(f"--beam {args.beam}: at most {MAX_BEAM} parents")
    if args.max_candidates is not None:
        _positive(args.max_candidates, "--max-candidates")
    if args.max_minutes is not None and not args.max_minutes > 0:  # also refuses nan
        raise UserError(f"--max-minutes must be > 0, got {args.max_minutes:g}")
    root = Path(args.root)  # resolved by agent.store.locate (a file there is already one line)
    if not root.exists() and not root.resolve().parent.is_dir():
        raise UserError(f"--root {root}: {root.resolve().parent} does not exist", "create it first, or fix the path")
    from agent.store import Store

    if not Store(root).writable:
        raise UserError(f"--root {root}: this store is read-only here", "a run needs a folder it can write; "
                        "`agent leaderboard`, `agent show` and `agent runs` can still read this one")
    try:  # os.access says yes to root on /proc or a full disk: creating the folder is the test
        Store(root).candidates_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--root {root}: cannot create {Store(root).candidates_dir}: {e.strerror or e}") from None
    a = _assembly(args)
    a.user = user
    # The proposer is built before the run is created or reopened: a missing key leaves no empty run behind.
    calls = wiring.CallLog(a.store, a.run_id)
    proposer = wiring.build_proposer(a, calls)
    mode: Mode = "quiet" if args.quiet else "json" if args.json else "auto"
    if a.run_id is None:
        _say_if_new(args, a.store)
    config, store = a.config, a.store
    best = None
    if a.run_id is not None:  # a resumed run's progress starts from its best, not from "no correct kernel yet"
        best_id = store.get_run(a.run_id).best
        best = store.get_candidate(best_id) if best_id else None
    with LiveProgress(mode, total_iterations=config.iterations, best=best,
                      heartbeat_s=user.progress.heartbeat_s) as progress:
        if a.run_id is None:
            from agent.versions import versions

            a.run_id = store.create_run(config, gpu=a.gpu.name, device=config.device, versions=versions())
        else:
            store.reopen_run(a.run_id, config)  # with the flags a resume may change
        calls.run_id, a.progress = a.run_id, progress
        if config.llm == "offline" and args.llm is None and not args.resume:
            progress.message("no OPENAI_API_KEY: using the embedded offline proposer (no LLM)")
        target = a.gpu.name + (", the seed's GPU: --gpu NAME to choose" if config.gpu == "auto" and
                               config.device == "cpu" else "")
        search = config.search + (f" {config.beam}" if config.search == "beam" else "")
        progress.message(f"run {a.run_id}: {a.problem.name} on {config.device} (target {target}), stage "
                         f"{config.stage}, {count(config.iterations, 'iteration')} × "
                         f"{count(config.samples, 'sample')}, search "
                         f"{search}, proposer {proposer.name}")
        parts = wiring.build_parts(a, proposer)
        try:
            outcome = loop.run(config, a.run_id, problem=a.problem, gpu=a.gpu, parts=parts, store=store,
                               progress=progress)
        except KeyboardInterrupt as e:
            signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
            store.finish_run(a.run_id, "interrupted", f"stopped by {signal.Signals(signum).name}")
            raise Interrupted(signum, "interrupted; nothing finished is lost",
                              f"continue with: agent run --resume {a.run_id}") from None
        except BaseException as e:
            store.finish_run(a.run_id, "failed", printable(str(e).splitlines()[0] if str(e) else type(e).__name__))
            raise
        finally:
            parts.close()
    _show(args, store, a.run_id, outcome, parts.summary())
    return _failed(a.run_id, outcome.error, outcome.hint)


def _say_if_new(args: argparse.Namespace, store) -> None:  # store: agent.store.Store
    """A store this run is about to create where it was found or configured (not named by --root): one stderr line
    saying where, so the user, and commands run from elsewhere, can find it again."""
    if args.store_root.source == "--root" or store.exists():
        return
    from agent.view import console

    where = store.root.resolve()
    console(stderr=True).print(f"new store in {where} (candidates/, profiles/): commands run there or in a folder "
                               f"below find it; elsewhere give --root {where}", markup=False, soft_wrap=True)


def _assembly(args: argparse.Namespace):  # -> agent.wiring.Assembly
    """The run's configuration (new, or the resumed run's own), checked before anything is recorded."""
    from agent import wiring
    from agent.catalog import resolve_gpu
    from agent.harness import default_device
    from agent.problems import load_problem
    from agent.scale import cluster_device, placement
    from agent.schema import RunConfig
    from agent.stages import get_stage
    from agent.store import Store

    store = Store(args.root)
    run_id = None
    if args.resume:
        run_id = store.resolve_run(args.resume)
        record = store.get_run(run_id)
        if record.status == "running":  # its process is alive: two loops must not write one run
            raise UserError(f"run {run_id} is still running (pid {record.pid} on {record.host})",
                            "stop it first, or wait for it to finish")
        config = _resumed_config(args, record.config)
        problem = load_problem(config.problem, config.device)
    else:
        if args.stage != "auto":
            get_stage(args.stage)  # unknown stage: one line naming the choices
        device: Literal["cuda", "cpu"] = args.device or (cluster_device(args.cluster) if args.cluster else default_device())
        if device == "cuda" and not args.cluster and default_device() != "cuda":
            raise UserError("--device cuda but no CUDA GPU is visible", "use --device cpu for CPU mode")
        problem = load_problem(args.problem, device)  # once: a foreign file's sizes are checked (and noticed) here
        config = RunConfig(problem=args.problem, stage=args.stage, gpu=args.gpu, iterations=args.iterations,
                           samples=args.samples, llm=args.llm or wiring.default_llm(), model=args.model,
                           llm_timeout_s=args.llm_timeout, llm_retries=args.llm_retries,
                           budget_usd=args.budget_usd, device=device, patience=args.patience,
                           timeout_s=args.timeout, objective=args.objective, precision=args.precision, seed=args.seed, root=args.root,
                           diagnosis=args.diagnosis == "on", start=args.start, search=args.search, beam=args.beam,
                           memory=args.memory == "on", max_candidates=args.max_candidates,
                           max_minutes=args.max_minutes)
    wiring.check_llm(config.llm, store)  # a bad --llm is one line, before any other output
    return wiring.Assembly(config=config, problem=problem, gpu=resolve_gpu(config.gpu, warn=config.device == "cuda"),
                           store=store, placement=placement(args.gpus, args.cluster, config.device), run_id=run_id,
                           resumed=run_id)


def _resumed_config(args: argparse.Namespace, config):  # -> RunConfig
    """The resumed run's config with the flags that may change applied; a flag that would change what the run
    measures is one line."""
    for flag, field in FIXED.items():
        given = getattr(args, flag)
        had = getattr(config, field)
        if flag in ("diagnosis", "memory"):  # on/off on the command line, a bool in the config
            had = "on" if had else "off"
        if given is not None and given != had:
            raise UserError(f"--{flag.replace('_', '-')} {given}: run {args.resume} was started with "
                            f"{had} and a resumed run keeps it", "start a new run to change it")
    update = {field: getattr(args, flag) for flag, field in RESUMABLE.items() if getattr(args, flag) is not None}
    return config.model_copy(update=update)


def _show(args: argparse.Namespace, store, run_id: str, outcome, summary: str | None) -> None:
    from agent.view import console, leaderboard_fitting, run_summary

    top = store.leaderboard(run=run_id, limit=5)
    if args.json:
        print(json.dumps({"run": run_id, "stop_reason": outcome.stop_reason, "iterations": outcome.iterations,
                          "best": outcome.best.candidate if outcome.best else None,
                          "error": outcome.error, "usage": outcome.usage.model_dump(),
                          "leaderboard": [r.model_dump(mode="json") for r in top]}))
        return
    out = console()
    out.print(run_summary(store.get_run(run_id)))
    if top:
        out.print(leaderboard_fitting(top, out, title="Top candidates"))
    out.print(f"stopped: {outcome.stop_reason}")
    if summary:
        out.print(summary)
    if outcome.best:
        b = outcome.best
        unit = "mJ per call" if b.timing is not None and b.timing.ranks_by(b.objective) == "energy" else "ms"
        out.print(f"best: [bold]{b.candidate}[/] ({b.ms:.3f} {unit}); "
                  f"export with: agent export {outcome.best.candidate} -o kernel.py")


def _failed(run_id: str, error: str | None, hint: str | None = None) -> int:
    """A run that ended on a failure (not a limit) exits non-zero, after everything it finished is shown."""
    if error:
        raise UserError(f"run {run_id} stopped early: {error}",
                        f"{hint or 'fix it'}, then: agent run --resume {run_id}")
    return 0


def _positive(value: int, flag: str, zero_ok: bool = False) -> None:
    if value < 0 or (value == 0 and not zero_ok):
        raise UserError(f"{flag} must be {'≥ 0' if zero_ok else '≥ 1'}, got {value}")
