"""`agent run`: parse flags into a RunConfig, build the parts (agent.wiring), hand them to agent.loop.run."""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path
from typing import Any, Literal

from agent import wiring
from agent.errors import Interrupted, UserError
from agent.printable import printable
from agent.plural import count
from agent.runconfig import RunConfig, flag_values, new_config, resumed, run_flags


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="optimize a problem's hot path: render → propose → evaluate → profile → record",
                       description="Run the optimization loop for one stage (or --stage auto: walk the stage "
                                   "ladder by bottleneck). Everything is recorded under --root.")
    add_run_flags(p)
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


def add_run_flags(p: argparse.ArgumentParser, model: type[RunConfig] | None = None) -> None:
    """An option for every run parameter, declared once in agent.runconfig.RunConfig (or `model`, one with more)."""
    metavars = {"llm": wiring.llm_choices("|")}  # the proposers are registered in agent.wiring
    for f in run_flags(model):
        p.add_argument(f.option, type=f.kind, choices=f.choices, metavar=metavars.get(f.name, f.flag.metavar),
                       help=f.flag.help)


def run(args: argparse.Namespace) -> int:
    from agent import loop
    from agent.config import UserConfig
    from agent.view import LiveProgress
    from agent.view.progress import Mode

    user: UserConfig = getattr(args, "user", None) or UserConfig()
    # A flag wins over the user's config (agent.config), which wins over the built-in default; a resume keeps its own.
    values = flag_values(vars(args), None if args.resume else user.run.model_dump(exclude_none=True))
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
    _template_early(values["device"], args)
    a = _assembly(args, values)
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
        if config.llm == "offline" and values["llm"] is None and not args.resume:
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
            outcome = loop.run(wiring.task(a), parts, store, progress)
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


def _template_early(device: str | None, args: argparse.Namespace) -> None:
    """Start the warm workers' template (agent.harness.runner.prestart) before this process imports torch to find its
    GPU: both import for seconds, now side by side in two processes (an H200's warm run's first candidate waited
    4.8 s for a template started after that import). A new run on this host's GPU only, where a CUDA driver loads
    (CPU mode's parent imports little before its first check; a run refused for want of a GPU must not wait for a
    template to start before it exits)."""
    if args.resume or args.gpus or args.cluster or device == "cpu":
        return
    from agent.catalog import cuda_driver_loads

    if not cuda_driver_loads():
        return
    import threading

    from agent.harness import runner

    threading.Thread(target=runner.prestart, args=("cuda",), name="template-early", daemon=True).start()


def _say_if_new(args: argparse.Namespace, store) -> None:  # store: agent.store.Store
    """A store this run is about to create where it was found or configured (not named by --root): one stderr line
    saying where, so the user, and commands run from elsewhere, can find it again."""
    if args.store_root.source == "--root" or store.exists():
        return
    from agent.view import console

    where = store.root.resolve()
    console(stderr=True).print(f"new store in {where} (candidates/, profiles/): commands run there or in a folder "
                               f"below find it; elsewhere give --root {where}", markup=False, soft_wrap=True)


def _assembly(args: argparse.Namespace, values: dict[str, Any]):  # -> agent.wiring.Assembly
    """The run's configuration (new, or the resumed run's own with `values` given on resuming), checked before
    anything is recorded; the problem loaded once."""
    from agent.catalog import resolve_gpu
    from agent.harness import default_device
    from agent.problems import load_problem
    from agent.scale import cluster_device, placement
    from agent.store import Store

    store = Store(args.root)
    run_id = None
    if args.resume:
        run_id = store.resolve_run(args.resume)
        record = store.get_run(run_id)
        if record.status == "running":  # its process is alive: two loops must not write one run
            raise UserError(f"run {run_id} is still running (pid {record.pid} on {record.host})",
                            "stop it first, or wait for it to finish")
        config = resumed(record.config, values, args.resume)
    else:
        device: Literal["cuda", "cpu"] = values["device"] or (
            cluster_device(args.cluster) if args.cluster else default_device())
        if device == "cuda" and not args.cluster and default_device() != "cuda":
            raise UserError("--device cuda but no CUDA GPU is visible", "use --device cpu for CPU mode")
        config = new_config(values, llm=values["llm"] or wiring.default_llm(), device=device, root=args.root)
    problem = load_problem(config.problem, config.device)  # once: a foreign file's sizes are checked (and noticed) here
    wiring.check_llm(config.llm, store)  # a bad --llm is one line, before any other output
    return wiring.Assembly(config=config, problem=problem, gpu=resolve_gpu(config.gpu, warn=config.device == "cuda"),
                           store=store, placement=placement(args.gpus, args.cluster, config.device), run_id=run_id,
                           resumed=run_id)


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
