"""Every benchmark of issue 10 in one call, within a time budget (default 540 s: one ~9-minute GPU job).

    PYTHONPATH=/opt/site:$PWD python3 bench/suite/run_all.py              # on the H100, from the repo root
    python3 bench/suite/run_all.py --cpu-smoke                             # plumbing check on a CPU machine (no ncu)
    python3 bench/suite/run_all.py --tables-from $OUT/bench_all.json       # re-render the tables from a saved run

Parts, each in its own process with its own deadline (a part that fails or runs out of time is reported and the
driver goes on), in priority order, the targets first:
  limits      copy bandwidth and the read-once times (bench/suite/limits.py), plus the software versions
  mf_run      `agent run --stage memory-fusion --llm offline --samples 8` (its iteration 0 also gives section 2:
              eager, torch.compile and the seed through the agent's own harness, and the seed's ncu profile)
  baselines   only if mf_run recorded no iteration 0: the seed through the harness and the profiler
  accuracy    the harness's timing function (3 repeats), a plain loop, ncu over every kernel of the same forwards
              at --clock-control none and base, for eager, compile, the seed and the memory-fusion best
  throughput  seconds per candidate by phase (sandboxed worker cold/warm, with and without timing; ncu sets)
  e2e_run     `agent run --stage auto --llm offline` with what time is left
Files under $OUT (or ./bench_out): bench_all.json (everything, rewritten after each part), bench_all.log,
bench_tables.md (sections 1-6 for BENCHMARKS.md), best_mf.py, best_e2e.py. Large artifacts (run stores, ncu
reports) stay in the work directory (--work, default /var/tmp/agent-bench-*), outside the candidates' private /tmp.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parents[1]
sys.path.insert(0, str(BENCH))

import bench_summary as S  # noqa: E402
import bench_tables as T  # noqa: E402
from parts.common import child_env, run_until, tail  # noqa: E402

MARGIN_S = 8.0  # left at the end of the budget for rendering and writing


@dataclass(frozen=True)
class Part:
    name: str
    planned_s: float | None  # None: whatever is left (the last part)
    min_s: float  # below this it is not started (and this much is reserved for it while earlier parts run)
    title: str


GPU_PARTS = (
    Part("limits", 25, 10, "1. limits"),
    Part("mf_run", 270, 150, "3. memory-fusion run (and 2. baselines from its iteration 0)"),
    Part("baselines", 70, 0, "2. baselines, standalone (only if the run recorded no iteration 0)"),
    Part("accuracy", 140, 50, "4. harness accuracy"),
    Part("throughput", 60, 30, "6. throughput"),
    Part("e2e_run", None, 60, "5. end to end (--stage auto)"),
)
CPU_PARTS = (
    Part("limits", 60, 10, "1. limits"),
    Part("mf_run", 240, 60, "3. memory-fusion run"),
    Part("baselines", 120, 0, "2. baselines, standalone"),
    Part("accuracy", 180, 30, "4. harness accuracy"),
    Part("throughput", 180, 30, "6. throughput"),
    Part("e2e_run", None, 60, "5. end to end"),
)
OK_STATUSES = ("ok", "not needed")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Run every benchmark of issue 10 within a time budget.")
    p.add_argument("--budget-s", type=float, default=None, help="total seconds (default 540; 900 with --cpu-smoke)")
    p.add_argument("--cpu-smoke", action="store_true", help="CPU mode at CPU sizes, no ncu: checks the plumbing")
    p.add_argument("--out", type=Path, default=None, help="where results go (default $OUT or ./bench_out)")
    p.add_argument("--work", type=Path, default=None, help="scratch directory (default /var/tmp/agent-bench-*)")
    p.add_argument("--parts", default=None, help="comma-separated subset of: " + ",".join(x.name for x in GPU_PARTS))
    p.add_argument("--mf-iterations", type=int, default=None, help="memory-fusion run iterations (default 1; smoke 1)")
    p.add_argument("--mf-samples", type=int, default=None, help="memory-fusion run K (default 8; smoke 2)")
    p.add_argument("--e2e-iterations", type=int, default=None, help="auto run iterations (default 4; smoke 1)")
    p.add_argument("--e2e-samples", type=int, default=None, help="auto run K (default 3; smoke 1)")
    p.add_argument("--e2e-patience", type=int, default=1, help="auto run patience (default 1)")
    p.add_argument("--accuracy-repeats", type=int, default=3, help="repeats of the harness timing per item")
    p.add_argument("--candidate-timeout-s", type=float, default=90.0, help="agent run --timeout")
    p.add_argument("--tables-from", type=Path, default=None, help="only render the tables of a saved bench_all.json")
    return p.parse_args(argv)


def _commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or None if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def _work_dir(arg: Path | None) -> Path:
    if arg:
        arg.mkdir(parents=True, exist_ok=True)
        return arg.resolve()
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() and os.access("/var/tmp", os.W_OK) else REPO
    return Path(tempfile.mkdtemp(prefix="agent-bench-", dir=base))


def _params(args: argparse.Namespace, smoke: bool) -> dict:
    """The runs' sizes and limits: the flags given, else the defaults of a GPU run or of a CPU smoke run."""
    return {
        "mf_iterations": args.mf_iterations or 1, "mf_samples": args.mf_samples or (2 if smoke else 8),
        "e2e_iterations": args.e2e_iterations or (1 if smoke else 4), "e2e_samples": args.e2e_samples or (1 if smoke else 3),
        "e2e_patience": args.e2e_patience, "accuracy_repeats": args.accuracy_repeats,
        "candidate_timeout_s": args.candidate_timeout_s if not smoke else max(args.candidate_timeout_s, 300.0),
    }


def _run_part(name: str, ctx: dict, work: Path) -> dict:
    """One part in its own process (bench_parts.py) until ctx's timeout: its entry of the combined JSON."""
    ctx_path, res_path = work / f"{name}.ctx.json", work / f"{name}.result.json"
    ctx_path.write_text(json.dumps(ctx, default=str))
    res_path.unlink(missing_ok=True)
    cmd = [sys.executable, str(BENCH / "bench_parts.py"), name, str(ctx_path), str(res_path)]
    out_file, err_file = work / f"{name}.out", work / f"{name}.err"
    smoke, timeout = ctx["cpu_smoke"], ctx["timeout_s"]
    rc, cut, wall = run_until(cmd, deadline=time.monotonic() + timeout, cwd=REPO,
                              env=child_env({"TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"} if smoke else None), stdout=out_file, stderr=err_file)
    try:
        res = json.loads(res_path.read_text())
    except (OSError, ValueError):
        res = {}
    status = "ok" if rc == 0 and not res.get("error") else ("timeout" if cut else "failed")
    entry = {"status": status, "wall_s": round(wall, 1), "timeout_s": round(timeout, 1), "returncode": rc,
             "data": res.get("data", {})}
    if res.get("error") or status != "ok":
        entry["error"] = res.get("error") or tail(err_file, 1500) or f"exit {rc}"
    return entry


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.tables_from:
        print(T.render_tables(json.loads(args.tables_from.read_text())))
        return 0
    smoke = args.cpu_smoke
    budget = args.budget_s or (900.0 if smoke else 540.0)
    out = (args.out or Path(os.environ.get("OUT") or "bench_out")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = _work_dir(args.work)
    wanted = set(args.parts.split(",")) if args.parts else None
    parts = [p for p in (CPU_PARTS if smoke else GPU_PARTS) if wanted is None or p.name in wanted]
    params = _params(args, smoke)
    t_start = time.monotonic()
    combined: dict = {
        "meta": {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "budget_s": budget,
                 "cpu_smoke": smoke, "command": "python3 bench/suite/run_all.py " + " ".join(sys.argv[1:] if argv is None else argv),
                 "commit": _commit(), "work": str(work), "params": params},
        "env": {}, "parts": {},
    }
    log_path, json_path = out / "bench_all.log", out / "bench_all.json"
    log = open(log_path, "a", encoding="utf-8")

    def say(msg: str) -> None:
        line = f"[{time.monotonic() - t_start:6.1f} s] {msg}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    def write_json() -> None:
        combined["meta"]["elapsed_s"] = round(time.monotonic() - t_start, 1)
        tmp = json_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(combined, indent=1, default=str))
        os.replace(tmp, json_path)

    say(f"budget {budget:.0f} s, {'CPU smoke' if smoke else 'cuda'}; out {out}; work {work}; parts {[p.name for p in parts]}")
    spent_planned = 0.0  # planned seconds of the parts done so far (what they were allowed without banking)
    for i, part in enumerate(parts):
        results = {k: v.get("data", {}) for k, v in combined["parts"].items()}
        if part.name == "baselines" and (results.get("mf_run", {}).get("seed_summary") or {}).get("ms") is not None:
            combined["parts"][part.name] = {"status": "not needed", "wall_s": 0.0}
            continue
        elapsed = time.monotonic() - t_start
        remaining = budget - elapsed - MARGIN_S
        reserve = sum(p.min_s for p in parts[i + 1:])
        banked = spent_planned - elapsed
        timeout = S.part_timeout(part.planned_s, banked, remaining, reserve)
        if timeout < max(part.min_s, 1.0):
            combined["parts"][part.name] = {"status": f"skipped: {timeout:.0f} s left of {part.min_s:.0f} s needed", "wall_s": 0.0}
            say(f"{part.title}: skipped ({timeout:.0f} s available)")
            write_json()
            continue
        spent_planned += part.planned_s if part.planned_s is not None else timeout
        ctx = {"device": "cpu" if smoke else "cuda", "cpu_smoke": smoke, "out": str(out), "work": str(work),
               "timeout_s": timeout, "params": params, "results": results}
        say(f"{part.title}: start, {timeout:.0f} s")
        entry = _run_part(part.name, ctx, work)
        status, wall = entry["status"], entry["wall_s"]
        out_file, err_file = work / f"{part.name}.out", work / f"{part.name}.err"
        combined["parts"][part.name] = entry
        if part.name == "limits":
            combined["env"] = entry["data"].get("env", {})
        log.write(f"--- {part.name} stdout (tail)\n{tail(out_file, 6000)}\n--- {part.name} stderr (tail)\n{tail(err_file, 6000)}\n")
        say(f"{part.title}: {status} in {wall:.0f} s" + (f" — {str(entry['error']).strip().splitlines()[-1][:200]}" if status != "ok" else ""))
        write_json()

    combined["meta"]["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    write_json()
    try:
        tables = T.render_tables(combined)
    except Exception as e:  # noqa: BLE001 - the JSON is safe; the tables can be re-rendered with --tables-from
        tables = f"(could not render the tables: {type(e).__name__}: {e}; rerun with --tables-from {json_path})"
    (out / "bench_tables.md").write_text(tables + "\n")
    print("\n" + tables, flush=True)
    say(f"done in {time.monotonic() - t_start:.0f} s; files: {sorted(p.name for p in out.iterdir())}")
    log.close()
    bad = [n for n, p in combined["parts"].items() if p["status"] not in OK_STATUSES]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
