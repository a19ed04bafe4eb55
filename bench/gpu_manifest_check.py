"""The manifest's answers judged on a GPU at full size: each case's `gpu_verdict` where the GPU's differs from CPU
mode's (a needs_gpu answer is judged as any other there), else its `verdict`, and its `message` where given.

    python bench/gpu_manifest_check.py [NAME ...] [--match TEXT] [--time] [--device cuda|cpu] [--out DIR]

NAME: manifest entries (default: all); --match: entries whose name or threat contains TEXT (repeatable);
--time: time the correct ones too (both clocks); --out: where the JSON goes ($OUT, else bench/results).
Prints one row per case and a last line `N passed, M failed`; exit 1 if any case differs. A case's `message` is
checked in CPU mode only (it names the trial that catches it there).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.harness import EvalRequest, evaluate_many  # noqa: E402
from agent.problems import load_problem  # noqa: E402
from agent.stages import get_stage  # noqa: E402

CANDIDATES = REPO / "tests" / "candidates"


def selected(manifest: dict, names: list[str], match: list[str]) -> dict:
    if names:
        unknown = [n for n in names if n not in manifest]
        if unknown:
            raise SystemExit(f"not in the manifest: {', '.join(unknown)}")
        return {n: manifest[n] for n in names}
    if match:
        return {n: c for n, c in manifest.items() if any(m in n or m in c.get("threat", "") for m in match)}
    return manifest


def request(case: dict, timed: bool, device: str) -> EvalRequest:
    problem = case.get("problem", "gap44")
    where = str(CANDIDATES / problem) if problem.endswith(".py") else problem
    text = (CANDIDATES / case["file"]).read_text()
    if case.get("transform") == "crlf":
        text = text.replace("\n", "\r\n")
    return EvalRequest(source=text, problem=load_problem(where), stage=get_stage(case.get("stage", "memory-fusion")),
                       device=device, time_it=timed or case.get("time", False))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*")
    p.add_argument("--match", action="append", default=[])
    p.add_argument("--time", action="store_true")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: the manifest's own verdicts")
    p.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "bench" / "results"))
    a = p.parse_args()
    manifest = tomllib.loads((CANDIDATES / "manifest.toml").read_text())
    cases = selected(manifest, a.names, a.match)
    start = time.monotonic()
    results = evaluate_many([request(c, a.time, a.device) for c in cases.values()])
    rows, failed = [], 0
    for (name, case), r in zip(cases.items(), results):
        want = case.get("gpu_verdict", case["verdict"]) if a.device == "cuda" else case["verdict"]
        # a case's `message` names what CPU mode catches it with; on a GPU the verdict is what is checked
        ok = r.verdict == want and (a.device == "cuda" or "message" not in case or case["message"] in r.message)
        failed += not ok
        t = r.timing
        rows.append({"name": name, "expected": want, "got": r.verdict.value, "ok": ok, "message": r.message,
                     "device_ms": t.device_ms if t else None, "latency_ms": t.latency_ms if t else None})
        ms = f" {t.device_ms:.3f} ms" if t and t.device_ms else ""
        print(f"{'ok  ' if ok else 'DIFF'} {name:48s} {want:15s} {r.verdict.value:15s}{ms} {r.message[:150]}")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    out = Path(a.out) / "gpu_manifest_check.json"
    out.write_text(json.dumps({"cases": rows, "wall_s": round(time.monotonic() - start, 1)}, indent=1))
    print(f"{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
