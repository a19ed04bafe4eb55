"""The README's main job, timed as its user lives it: `agent run` from the shell prompt to its last line.

    python bench/suite/main_job.py [--label L] [--timeout S] [--root DIR] [--out DIR] -- [agent run's arguments]

Runs `python -m agent run ARGS --json` (the offline proposer where no OPENAI_API_KEY is set), stamps every event with
the seconds since the process was spawned, and prints: the wall time (or that the limit cut it), the first verdict,
each new best (when, both clocks, speedup over eager), the seconds spent in each phase (proposing, evaluating,
profiling) and the stop reason. Writes <out>/main_job_<label>.json with every event. Issue 36's targets: the
memory-fusion run under 2 minutes on one GPU with its first verdict within 15 s (warm cache: a second run in the
same --root), `--stage auto` at its algebraic best (>= 50x eager device, >= 30x latency) within 3 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--label", default="run")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--root", default=None, help="agent's --root (the same one twice: a warm cache)")
    p.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "bench" / "results"))
    p.add_argument("--debug", action="store_true", help="agent --debug: its debug log (every line) kept in "
                   "<out>/main_job_<label>.stderr")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    args = [x for x in a.args if x != "--"]
    argv = [sys.executable, "-m", "agent", *(["--debug"] if a.debug else []), "run", *args, "--json",
            *(["--root", a.root] if a.root else [])]
    events: list[dict] = []
    t0 = time.monotonic()
    err_file = tempfile.TemporaryFile(mode="w+")  # a pipe nobody reads would fill and stall the run
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err_file, text=True, cwd=REPO)
    fired = threading.Event()

    def cut_it() -> None:  # at the limit, also when the run falls silent
        fired.set()
        proc.terminate()

    limit = threading.Timer(a.timeout, cut_it)
    limit.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            e["t_s"] = round(time.monotonic() - t0, 2)
            events.append(e)
        proc.wait(30)
    finally:
        limit.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wall = round(time.monotonic() - t0, 1)
    cut = fired.is_set()
    err_file.seek(0)
    whole = err_file.read()
    err = whole[-2000:]
    summary = report(events, wall, cut, proc.returncode)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    if a.debug:
        (Path(a.out) / f"main_job_{a.label}.stderr").write_text(whole)
    (Path(a.out) / f"main_job_{a.label}.json").write_text(json.dumps(
        {"argv": argv[2:], "summary": summary, "events": events, "stderr_tail": err}, indent=1))
    return 0 if not cut and proc.returncode == 0 else 1


def report(events: list[dict], wall: float, cut: bool, rc: int | None) -> dict:
    """Print the run's figures and return them."""
    verdicts = [e for e in events if e.get("event") == "candidate"]
    bests = [e for e in events if e.get("event") == "best"]
    phases: dict[str, float] = {}
    marks = [e for e in events if e.get("event") == "phase"]
    for here, nxt in zip(marks, marks[1:] + [{"t_s": wall}]):
        phases[here["phase"]] = round(phases.get(here["phase"], 0.0) + nxt["t_s"] - here["t_s"], 1)
    end = next((e for e in reversed(events) if "stop_reason" in e), {})
    print(f"wall {wall} s{' (cut by the limit)' if cut else ''}, exit {rc}; {len(verdicts)} verdicts, "
          f"first at {verdicts[0]['t_s'] if verdicts else None} s")
    for b in bests:
        print(f"  best {b['candidate']} at {b['t_s']} s: device {b.get('device_ms')} ms, latency {b.get('latency_ms')}"
              f" ms, x{b.get('device_speedup_vs_eager')} eager device, x{b.get('latency_speedup_vs_eager')} latency")
    print("  phases (s): " + ", ".join(f"{k} {v}" for k, v in phases.items()))
    print(f"  stop: {end.get('stop_reason')}")
    last = bests[-1] if bests else {}
    return {"wall_s": wall, "cut": cut, "exit": rc, "verdicts": len(verdicts),
            "first_verdict_s": verdicts[0]["t_s"] if verdicts else None, "phases_s": phases,
            "best": last, "best_at_s": last.get("t_s"), "stop_reason": end.get("stop_reason")}


if __name__ == "__main__":
    sys.exit(main())
