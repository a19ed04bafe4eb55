"""Issue 20 on a GPU: the CLI's live progress, a clean stop and the read commands, through the real `agent` on CUDA.

    python bench/checks/cli.py --out DIR

1. `agent run --json` (offline proposer, 1 iteration x 4 samples): the phases in order, each candidate's elapsed time
   as it landed (before: all of a round at its end), the profiling phase of the new best;
2. the same through `--gpus all` (agent.scale's pool): candidates land as they finish there too;
3. SIGTERM while candidates run on the GPU: exit 143, one line, run interrupted, no process of the run left on the
   GPU a few seconds later (nvidia-smi);
4. `agent leaderboard`, `agent runs` and `agent show` of what was recorded.
Prints a summary and writes DIR/gpu_cli_check.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def agent(*args: object, timeout: float = 580) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "agent", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=timeout)


def events(p: subprocess.CompletedProcess) -> tuple[list[dict], dict]:
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip().startswith("{")]
    return lines[:-1], lines[-1]


def landing(evs: list[dict]) -> dict:
    phases = [(e["phase"], e.get("detail"), e.get("total"), e["elapsed_s"]) for e in evs if e["event"] == "phase"]
    cands = [(e["iteration"], e["index"], e["verdict"], e["elapsed_s"], e.get("duration_s")) for e in evs
             if e["event"] == "candidate"]
    return {"phases": phases, "candidates": cands,
            "best": [e["candidate"] for e in evs if e["event"] == "best"]}


def gpu_processes() -> list[str]:
    p = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name", "--format=csv,noheader"],
                       capture_output=True, text=True)
    return [x for x in p.stdout.splitlines() if x.strip()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--parts", default="local,pool,stop,read", help="which checks, comma-separated")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    root = Path("/opt/agent-check")
    root.mkdir(parents=True, exist_ok=True)
    out: dict = {}

    if "local" in parts:
        local(root, out)
    if "pool" in parts:
        pool(root, out)
    if "stop" in parts:
        stop(root, out)
    if "read" in parts and "local" in out:
        read(root, out)
    (args.out / "gpu_cli_check.json").write_text(json.dumps(out, indent=2, default=str))


def local(root: Path, out: dict) -> None:
    t0 = time.monotonic()
    p = agent("run", "--llm", "offline", "--iterations", 1, "--samples", 4, "--root", root / "local", "--json")
    out["local"] = {"exit": p.returncode, "wall_s": round(time.monotonic() - t0, 1), "stderr": p.stderr[-2000:]}
    if p.returncode == 0:
        evs, summary = events(p)
        out["local"] |= landing(evs) | {"run": summary["run"], "best_id": summary["best"]}
    print("local:", json.dumps(out["local"], default=str)[:3000], flush=True)


def pool(root: Path, out: dict) -> None:
    t0 = time.monotonic()
    p = agent("run", "--llm", "offline", "--iterations", 1, "--samples", 4, "--gpus", "all", "--root",
              root / "pool", "--json")
    out["pool"] = {"exit": p.returncode, "wall_s": round(time.monotonic() - t0, 1), "stderr": p.stderr[-2000:]}
    if p.returncode == 0:
        evs, summary = events(p)
        out["pool"] |= landing(evs) | {"run": summary["run"]}
    print("pool:", json.dumps(out["pool"], default=str)[:3000], flush=True)


def stop(root: Path, out: dict) -> None:
    # A stop while candidates run: the offline proposer's round is on the GPU some seconds after its start.
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "agent", "run", "--llm", "offline", "--iterations", "3",
                             "--samples", "4", "--root", str(root / "stop"), "--json"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen_eval = False
    deadline = time.monotonic() + 240
    assert proc.stdout is not None
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if '"phase": "evaluating"' in line and '"total": 4' in line:
            seen_eval = True
            break
    time.sleep(8)  # the round's candidates are in their sandboxes, on the GPU
    on_gpu_before = gpu_processes()
    t_stop = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rest, err = proc.communicate(timeout=120)
    stopped_s = time.monotonic() - t_stop
    time.sleep(3)
    out["stop"] = {"saw_round": seen_eval, "exit": proc.returncode, "stop_s": round(stopped_s, 2),
                   "stderr_lines": err.strip().splitlines(), "gpu_processes_before": on_gpu_before,
                   "gpu_processes_after": gpu_processes()}
    runs = agent("runs", "--json", "--root", root / "stop")
    out["stop"]["runs"] = [(r["id"], r["status"], r["candidates"]) for r in json.loads(runs.stdout or "[]")]
    print("stop:", json.dumps(out["stop"]), flush=True)


def read(root: Path, out: dict) -> None:
    board = agent("leaderboard", "--all", "--root", root / "local")
    listing = agent("runs", "--root", root / "local")
    show = agent("show", out["local"].get("best_id") or "x", "--root", root / "local")
    out["read"] = {"leaderboard": board.stdout, "runs": listing.stdout, "show_lines": len(show.stdout.splitlines()),
                   "show_head": show.stdout[:1500]}
    print(board.stdout, listing.stdout, show.stdout[:1500], sep="\n")


if __name__ == "__main__":
    main()
