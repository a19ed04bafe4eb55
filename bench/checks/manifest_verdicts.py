"""The manifest's answers judged on a GPU at full size: each case's `gpu_verdict` where the GPU's differs from CPU
mode's (a needs_gpu answer is judged as any other there), else its `verdict`; its `gpu_message` where given.

    python bench/checks/manifest_verdicts.py [NAME ...] [--match TEXT] [--problem P] [--part K/N] [--time]
                                             [--device cuda|cpu] [--out DIR]

NAME: manifest entries (default: all); --match: entries whose name or threat contains TEXT (repeatable); --problem:
entries judged at problem P (repeatable; gap44 where a case names none): a GPU call of 10 minutes holds some problems'
baselines, not all; --part K/N: the K-th of N parts of what is selected (every N-th case from the K-th, K from 1),
to spread 200 gap44 cases over calls; --time: time every case (both clocks; the JSON then has each one's device and
latency ms, energy and eager's latency; cases with `time = true` are always timed); --out: where the JSON goes
($OUT, else bench/results). Prints one row per case and a last line `N passed, M failed`; exit 1 if any case differs. With
--device cpu it is the CPU suite's judgement (tests/test_harness.py): `verdict`, `message` and `timeout_s`, which
name the trial and limit CPU mode catches a case with, are checked and applied there only.

Typical GPU calls: `--match legit_` (every honest answer: all correct), `--time --problem gap44` (the gap44 cases as
a real evaluation judges them), `--problem kb_67_conv2d_gelu_gap --problem kb_51_gemm_sub_gap_lse_gelu_residual`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agent.harness import EvalRequest, evaluate_many  # noqa: E402
from agent.problems import load_problem  # noqa: E402
from agent.schema import EvalResult  # noqa: E402
from agent.stages import get_stage  # noqa: E402

CANDIDATES = REPO / "tests" / "candidates"


def part(text: str) -> tuple[int, int]:
    """--part's K/N."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"{text!r}: K/N with 1 <= K <= N, e.g. 2/3")
    return int(k), int(n)


def selected(manifest: dict, names: list[str], match: list[str], problems: list[str],
             share: tuple[int, int] = (1, 1)) -> dict:
    if names:
        unknown = [n for n in names if n not in manifest]
        if unknown:
            raise SystemExit(f"not in the manifest: {', '.join(unknown)}")
        return {n: manifest[n] for n in names}
    cases = manifest
    if match:
        cases = {n: c for n, c in cases.items() if any(m in n or m in c.get("threat", "") for m in match)}
    if problems:
        cases = {n: c for n, c in cases.items() if c.get("problem", "gap44") in problems}
    k, n = share
    return {name: c for i, (name, c) in enumerate(cases.items()) if i % n == k - 1}


def request(case: dict, timed: bool, device: str) -> EvalRequest:
    problem = case.get("problem", "gap44")
    where = str(CANDIDATES / problem) if problem.endswith(".py") else problem
    text = (CANDIDATES / case["file"]).read_text()
    if case.get("transform") == "crlf":
        text = text.replace("\n", "\r\n")
    # a case's timeout_s is CPU mode's (the interpreter's pace); a GPU gets the harness's scaled limit
    limit = case.get("timeout_s", 120) if device == "cpu" else None
    return EvalRequest(source=text, problem=load_problem(where), stage=get_stage(case.get("stage", "memory-fusion")),
                       device=device, time_it=timed or case.get("time", False), timeout_s=limit)


def judged(name: str, case: dict, r: EvalResult, device: str) -> dict:
    """One case's row: what was expected on this device, what came, and the figures a timed call has."""
    gpu = device == "cuda"
    want = case.get("gpu_verdict", case["verdict"]) if gpu else case["verdict"]
    text = case.get("gpu_message", "") if gpu else case.get("message", "")
    t = r.timing
    ok = r.verdict == want and text in r.message or (not gpu and r.verdict.value in case.get("also", []))
    return {"name": name, "expected": want, "got": r.verdict.value, "ok": ok,
            "message": r.message, "device_ms": t.device_ms if t else None, "latency_ms": t.latency_ms if t else None,
            "eager_latency_ms": t.eager_latency_ms if t else None, "energy_mj": t.energy_mj if t else None}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*")
    p.add_argument("--match", action="append", default=[])
    p.add_argument("--problem", action="append", default=[])
    p.add_argument("--part", type=part, default=(1, 1), help="K/N: every N-th selected case from the K-th")
    p.add_argument("--time", action="store_true")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: the manifest's own verdicts")
    p.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "bench" / "results"))
    a = p.parse_args()
    manifest = tomllib.loads((CANDIDATES / "manifest.toml").read_text())
    cases = selected(manifest, a.names, a.match, a.problem, a.part)
    start = time.monotonic()
    Path(a.out).mkdir(parents=True, exist_ok=True)
    out = Path(a.out) / "manifest_verdicts.json"
    names, landed, lock = list(cases), {}, threading.Lock()

    def show(i: int, r: EvalResult) -> None:  # as each verdict lands: a call cut by its limit still says what it judged
        with lock:
            _show(i, r)

    def _show(i: int, r: EvalResult) -> None:
        row = landed[i] = judged(names[i], cases[names[i]], r, a.device)
        ms = f" {row['device_ms']:.3f} ms device" if row["device_ms"] else ""
        print(f"{'ok  ' if row['ok'] else 'DIFF'} {row['name']:48s} {row['expected']:15s} {row['got']:15s}{ms} "
              f"{row['message'][:150]}", flush=True)
        out.write_text(json.dumps({"cases": [landed[k] for k in sorted(landed)],
                                   "wall_s": round(time.monotonic() - start, 1)}, indent=1))

    results = evaluate_many([request(c, a.time, a.device) for c in cases.values()], on_result=show)
    for i, r in enumerate(results):  # evaluate_many calls on_result for each; this is only a safety net
        if i not in landed:
            show(i, r)
    rows = [landed[i] for i in sorted(landed)]
    failed = sum(not row["ok"] for row in rows)
    print(f"{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
