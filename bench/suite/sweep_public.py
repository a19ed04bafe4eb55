"""Real code as a yardstick: judge folders of public KernelBench answers (bench/suite/sweep_collect.py builds them) with
the real CLI, and report per source the static refusals by rule and the verdicts.

    python bench/suite/sweep_public.py .sweep --jobs 12 --device cpu          # every answer, through `agent eval`
    python bench/suite/sweep_public.py .sweep --sample 20 --jobs 1            # 20 answers spread over the sources
    python bench/suite/sweep_public.py .sweep --static-only                    # extraction + static policy only, in-process
    python bench/suite/sweep_public.py .sweep --review                         # every static refusal, with its answer

Each answer is one `python -m agent eval ANSWER --problem PROBLEM --stage S --device D --no-timing --json` in its own
process group, killed past --timeout (verdict `sweep-timeout`). An answer the CLI cannot judge (a problem that
cannot be reduced for CPU mode, a harness error) is `cli-error` with the CLI's last line. Results are written after
every answer to --out (default SWEEP/results-DEVICE.json, SWEEP/results-static.json for --static-only); --resume
keeps what a killed run finished. The folders hold other people's code: they stay git-ignored, never committed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench" / "suite")]  # this checkout's agent (the static pass imports it), then ours
from sweep_tables import render, review  # noqa: E402

# the tag that ends each static violation ("line 3: ... [escape]"), before "; ", " (+N more)" or the end
_TAG = re.compile(r"\[([a-z][a-z0-9 _-]*)\](?=;\s|\s\(\+\d+ more\)|\s*$)")


def load_answers(sweep: Path, sources: list[str] | None, levels: list[str] | None) -> list[dict]:
    """Every answer of the sweep folder: source, answer and problem paths (absolute), model, origin."""
    out = []
    for manifest in sorted(sweep.glob("*/answers.json")):
        doc = json.loads(manifest.read_text())
        source = doc.get("source", manifest.parent.name)
        if sources and source not in sources:
            continue
        for answer, meta in doc["answers"].items():
            level = re.match(r"answers/level(\d)", answer)
            if levels and (not level or level.group(1) not in levels):
                continue
            out.append({"source": source, "answer": str(manifest.parent / answer),
                        "problem": str(manifest.parent / meta["problem"]), "model": meta.get("model"),
                        "origin": meta.get("origin")})
    return out


def sample(answers: list[dict], n: int, seed: int) -> list[dict]:
    """n answers, as evenly over the sources as they allow (seeded: the same n gives the same answers)."""
    rng = random.Random(seed)
    by_source: dict[str, list[dict]] = {}
    for a in answers:
        by_source.setdefault(a["source"], []).append(a)
    for pool in by_source.values():
        rng.shuffle(pool)
    picked: list[dict] = []
    while len(picked) < n and any(by_source.values()):
        for pool in by_source.values():
            if pool and len(picked) < n:
                picked.append(pool.pop())
    return picked


def violations_of(message: str) -> list[dict]:
    """The rule tags of a rule_violation message: static ones are "line N: ... [rule]"; run-time ones end with their
    rule's id too (records from before the rule ids: [run-time])."""
    parts = re.split(r";\s(?=line \d+:)", message)
    out = []
    for part in parts:
        tag = _TAG.search(part)
        static = re.match(r"line \d+:", part) is not None
        out.append({"rule": tag.group(1) if tag else "?", "kind": "static" if static else "run-time",
                    "message": part.strip()})
    return out


class Procs:
    """The `agent eval` processes in flight, each its own process group: a budget or a signal kills them all (their
    answers are left unjudged for --resume), and none starts after."""

    def __init__(self) -> None:
        self.lock, self.running, self.stopped = threading.Lock(), set(), False  # type: ignore[var-annotated]

    def start(self, cmd: list[str], env: dict[str, str]) -> subprocess.Popen | None:
        with self.lock:
            if self.stopped:
                return None
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
            self.running.add(proc)
            return proc

    def done(self, proc: subprocess.Popen) -> None:
        with self.lock:
            self.running.discard(proc)

    def kill(self, proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its own group: the eval and the sandboxes it started
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            for proc in self.running:
                self.kill(proc)


def _cli(a: dict, args: argparse.Namespace, procs: Procs) -> dict | None:
    """One answer's verdict from `agent eval --json` (None: stopped by the budget or a signal, not judged)."""
    cmd = [sys.executable, "-m", "agent", "eval", a["answer"], "--problem", a["problem"], "--stage", args.stage,
           "--device", args.device, "--no-timing", "--json"]
    if args.cache_dir:
        cmd += ["--cache-dir", str(args.cache_dir)]
    env = {"OMP_NUM_THREADS": "1", **os.environ,  # N evals at once: one thread each (the workers set it themselves)
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    start = time.monotonic()
    proc = procs.start(cmd, env)
    if proc is None:
        return None
    try:
        out, err = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        procs.kill(proc)
        proc.communicate()
        procs.done(proc)
        return None if procs.stopped else {"verdict": "sweep-timeout", "message": f"no verdict within "
                                           f"{args.timeout:g} s", "seconds": round(time.monotonic() - start, 1)}
    procs.done(proc)
    if procs.stopped and proc.returncode < 0:
        return None
    seconds = round(time.monotonic() - start, 1)
    notices = [line[:400] for line in err.splitlines() if "skipped" in line][:6]  # sizes the problem cannot run at
    try:
        res = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        last = [line for line in err.strip().splitlines() if line.strip()]
        return {"verdict": "cli-error", "message": (last[-1] if last else f"exit {proc.returncode}, no output")[:400],
                "exit": proc.returncode, "seconds": seconds, **({"notices": notices} if notices else {})}
    r = {"verdict": res["verdict"], "message": res.get("message", "")[:2000], "seconds": seconds}
    if notices:
        r["notices"] = notices
    if res.get("checks"):
        r["sizes"] = sorted({c["size"] for c in res["checks"]})
    if res["verdict"] == "rule_violation":
        r["violations"] = violations_of(res.get("message", ""))
    return r


def _static(a: dict, stage: str) -> dict:
    """Extraction and the static policy only, in this process, exactly as the CLI's first step (pipeline._static)."""
    from agent.harness.static import policy

    try:  # the CLI's own first step; private, so a rename says so in one line
        from agent.harness.pipeline import EvalRequest, _absent, _static
    except ImportError as e:
        sys.exit(f"error: --static-only needs agent.harness.pipeline's _static and _absent: {e}")
    from agent.problems import load_problem
    from agent.stages import get_stage

    req = EvalRequest(source=Path(a["answer"]).read_text(), problem=load_problem("gap44"), stage=get_stage(stage))
    res = _static(req, "cpu")
    if not hasattr(res, "verdict"):
        return {"verdict": "passes-static"}
    r = {"verdict": res.verdict.value, "message": res.message[:2000]}
    if res.verdict.value == "rule_violation" and res.code:
        vs = policy.check(res.code, req.stage.rules, _absent(req))
        lines = res.code.splitlines()
        r["violations"] = [{"rule": v.rule, "kind": "static", "message": str(v),
                            "line": lines[v.line - 1].strip()[:200] if 0 < v.line <= len(lines) else ""} for v in vs]
        if not vs:  # the encoding declaration: refused before the policy
            r["violations"] = violations_of(res.message)
    return r


def _cpu_sizes(problem: Path) -> str:
    """Whether CPU mode can reduce the problem: "reduced", "own sizes" (no size global it can resize: judged at full
    size on the CPU), or why the file does not load. Loading runs only the file's top level, never its Model."""
    import logging

    from agent.problems import load_problem

    logging.getLogger("agent.problems").setLevel(logging.ERROR)  # its "validated at its own sizes" notice: counted
    try:
        spec = load_problem(str(problem), None)
    except Exception as e:  # a foreign file: a reason, not a crash
        return f"load error: {str(e).splitlines()[0][-160:]}"
    return "reduced" if any(s.overrides for s in spec.cpu_sizes) else "own sizes"


_DEVICE_BRANCH = re.compile(r"\.is_cuda\b|\.device\.type\b|TRITON_INTERPRET")


def _on_device(answer: Path) -> bool:
    """Whether the answer asserts or branches on CUDA or the interpreter (a text search, not the judge's): what CPU
    mode cannot judge as the GPU would."""
    return _DEVICE_BRANCH.search(answer.read_text(errors="replace")) is not None


def _key(answer: str) -> str:
    """An answer's name within the sweep (source/answers/file): results move between machines with the folder."""
    return "/".join(Path(answer).parts[-3:])


def _save(path: Path, meta: dict, results: dict[str, dict]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"meta": meta, "results": list(results.values())}, indent=1) + "\n")
    tmp.replace(path)


def _versions() -> dict[str, str]:
    """What judged: Triton's interpreter differs between releases (3.9 removed block pointers)."""
    import torch
    import triton

    return {"python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__}


def _meta(args: argparse.Namespace, sweep: Path) -> dict:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    sources = {}
    for m in sorted(sweep.glob("*/answers.json")):
        doc = json.loads(m.read_text())
        sources[doc.get("source", m.parent.name)] = {k: doc.get(k) for k in ("repo", "commit", "problems")}
    return {"agent_commit": head.stdout.strip(), "versions": _versions(), "stage": args.stage, "device": "static" if args.static_only
            else args.device, "timeout_s": args.timeout, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "sources": sources}


def _judge_all(todo: list[dict], args: argparse.Namespace, out: Path, meta: dict, done: dict[str, dict]) -> None:
    """Judge `todo` --jobs at a time, saving after each; past --budget-s, or on SIGTERM/SIGINT, stop cleanly."""
    procs = Procs()
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # a killed sweep kills its evals too
    pool = ThreadPoolExecutor(max_workers=args.jobs)  # each thread waits on one `agent eval` process
    futures = {pool.submit(_cli, a, args, procs): a for a in todo}
    try:
        for i, f in enumerate(as_completed(futures, timeout=args.budget_s), 1):
            a, r = futures[f], f.result()
            if r is None:
                continue
            done[_key(a["answer"])] = {**a, **r}
            print(f"[{i}/{len(todo)}] {r['verdict']:<15} {r.get('seconds', 0):6.1f}s  {a['source']}: "
                  f"{Path(a['answer']).name}", file=sys.stderr)
            _save(out, meta, done)
    except (TimeoutError, KeyboardInterrupt) as e:
        print(f"stopped ({'budget' if isinstance(e, TimeoutError) else 'signal'}): {len(done)} judged; --resume "
              "goes on", file=sys.stderr)
    finally:
        procs.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        signal.signal(signal.SIGTERM, previous)
        _save(out, meta, done)


def run(args: argparse.Namespace) -> int:
    sweep = args.sweep.resolve()
    answers = load_answers(sweep, args.sources, args.levels)
    if not answers:
        print(f"error: no answers under {sweep} (build it with bench/suite/sweep_collect.py)", file=sys.stderr)
        return 2
    if args.sample:
        answers = sample(answers, args.sample, args.seed)
    out = args.out or sweep / f"results-{'static' if args.static_only else args.device}.json"
    meta = _meta(args, sweep)
    done: dict[str, dict] = {}
    if args.resume and out.exists():
        previous = json.loads(out.read_text())
        if previous["meta"].get("versions", meta["versions"]) != meta["versions"]:
            print(f"error: {out} was judged under {previous['meta']['versions']}, this is {meta['versions']}: "
                  "judge into another --out, or without --resume", file=sys.stderr)
            return 2
        done = {_key(r["answer"]): r for r in previous["results"]}
    todo = [a for a in answers if _key(a["answer"]) not in done]
    print(f"{len(answers)} answers, {len(answers) - len(todo)} already judged; results -> {out}", file=sys.stderr)
    if args.static_only:
        for a in todo:
            done[_key(a["answer"])] = {**a, **_static(a, args.stage), "cpu_sizes": _cpu_sizes(Path(a["problem"])),
                               "device_branch": _on_device(Path(a["answer"]))}
        _save(out, meta, done)
    else:
        _judge_all(todo, args, out, meta, done)
    wanted = {_key(a["answer"]) for a in answers}
    results = [r for r in done.values() if _key(r["answer"]) in wanted]
    print(render(results, meta, sweep))
    if args.review:
        print(review(results, sweep))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", type=Path, help="the folder bench/suite/sweep_collect.py built (one subfolder per source)")
    ap.add_argument("--jobs", type=int, default=1, help="answers judged at once (one `agent eval` process each)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--stage", default="correctness")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per answer before its process is killed")
    ap.add_argument("--sample", type=int, default=0, help="judge only N answers, spread over the sources")
    ap.add_argument("--seed", type=int, default=0, help="which sample")
    ap.add_argument("--sources", type=lambda s: s.split(","), help="comma-separated source names")
    ap.add_argument("--levels", type=lambda s: s.split(","), help="comma-separated KernelBench levels (1,2,3)")
    ap.add_argument("--static-only", action="store_true", help="extraction and the static policy only (no worker)")
    ap.add_argument("--review", action="store_true", help="list every static refusal with its answer and line")
    ap.add_argument("--tables-from", action="store_true", help="render --out's results without judging anything")
    ap.add_argument("--resume", action="store_true", help="keep the answers --out already holds")
    ap.add_argument("--budget-s", type=float, help="stop after this many seconds (in-flight answers unjudged)")
    ap.add_argument("--out", type=Path, help="results JSON (default: SWEEP/results-DEVICE.json)")
    ap.add_argument("--cache-dir", type=Path, help="`agent eval --cache-dir` (truths shared across answers)")
    args = ap.parse_args(argv)
    if args.jobs < 1 or args.timeout <= 0:
        ap.error("--jobs and --timeout must be positive")
    if not args.sweep.is_dir():
        ap.error(f"{args.sweep} is not a folder")
    if args.tables_from:
        path = args.out or args.sweep / f"results-{'static' if args.static_only else args.device}.json"
        if not path.exists():
            ap.error(f"{path} does not exist")
        doc = json.loads(path.read_text())
        print(render(doc["results"], doc["meta"], args.sweep.resolve()))
        if args.review:
            print(review(doc["results"], args.sweep.resolve()))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
