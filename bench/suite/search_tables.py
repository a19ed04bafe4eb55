"""Issue 18's comparison: greedy, beam and tree with the offline proposer and one candidate budget, per problem.

    python bench/suite/search_tables.py record ROOT RUN_ID SEARCH WALL_S OUT.json   # one run's figures, from its store
    python bench/suite/search_tables.py table DIR                                   # BENCHMARKS.md's table, from DIR/search_*.json

`record` appends one run to OUT.json (a list); bench/suite/search.sh calls it after each run. `table` prints the
markdown from those files, never from typed numbers: per problem and search, the best on both clocks, how many
proposals were judged when it was found, and how many in all.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def _order(candidate: str) -> tuple[int, int, int]:
    """(iteration, attempt, index) of `RUN-i3a2-c1`."""
    m = re.search(r"-i(\d+)(?:a(\d+))?-c(\d+)$", candidate)
    assert m is not None, candidate
    return int(m.group(1)), int(m.group(2) or 1), int(m.group(3))


def record(root: str, run_id: str, search: str, wall_s: float) -> dict:
    """One run's figures from its store: the best on both clocks, when it was found, what the run judged."""
    from agent.store import Store

    with Store(root) as store:
        run = store.get_run(run_id)
        rows = store.leaderboard(run=run_id, include_all=True)
        calls = [it.reason for it in store.iterations(run_id)]
    proposals = sorted((r for r in rows if r.iteration >= 1), key=lambda r: _order(r.candidate))
    best = next((r for r in rows if r.run_best), None)
    reached = 0 if best is None or best.iteration == 0 else 1 + [r.candidate for r in proposals].index(best.candidate)
    return {
        "problem": run.config.problem, "search": search, "beam": run.config.beam, "stage": run.config.stage,
        "run": run_id, "gpu": run.gpu, "device": run.device, "objective": run.config.objective,
        "samples": run.config.samples, "max_candidates": run.config.max_candidates, "status": run.status,
        "iterations": run.iterations, "judged": len(proposals),
        "correct": sum(r.verdict == "correct" for r in proposals), "reached_at": reached, "wall_s": round(wall_s, 1),
        # why the others failed: a search that wastes its budget on refused answers shows it here
        "refused": {r.candidate: f"{r.verdict}: {(r.message or '')[:200]}" for r in proposals if r.verdict != "correct"},
        "stages": sorted({r.stage for r in proposals}), "reasons": calls[-1:],
        "best": None if best is None else {
            "candidate": best.candidate, "parent": best.parent, "stage": best.stage, "iteration": best.iteration,
            "device_ms": best.device_ms, "latency_ms": best.latency_ms, "launches": best.launches,
            "device_speedup_vs_eager": best.device_speedup_vs_eager,
            "latency_speedup_vs_eager": best.latency_speedup_vs_eager,
            "device_speedup_vs_compile": best.device_speedup_vs_compile,
            "latency_speedup_vs_compile": best.latency_speedup_vs_compile, "meaningful": best.meaningful},
    }


def _ms(v: float | None) -> str:
    return f"{v:.4f}" if v is not None else "–"


def _x(v: float | None) -> str:
    return f"{v:.1f}×" if v is not None else "–"


def table(runs: list[dict]) -> str:
    """The markdown table: one row per (problem, search), the problems in the order first seen."""
    out = ["| problem | search | best device ms | × eager | best latency ms | × eager | × compile (latency) | "
           "found after | judged | correct | best's stage | wall s |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    order = {"greedy": 0, "beam": 1, "tree": 2}
    problems = list(dict.fromkeys(r["problem"] for r in runs))
    for r in sorted(runs, key=lambda r: (problems.index(r["problem"]), order.get(r["search"], 9))):
        b = r["best"] or {}
        name = r["search"] + (f" {r['beam']}" if r["search"] == "beam" else "")
        out.append(f"| {r['problem']} | {name} | {_ms(b.get('device_ms'))} | {_x(b.get('device_speedup_vs_eager'))} | "
                   f"{_ms(b.get('latency_ms'))} | {_x(b.get('latency_speedup_vs_eager'))} | "
                   f"{_x(b.get('latency_speedup_vs_compile'))} | {r['reached_at']} | {r['judged']} | {r['correct']} | "
                   f"{b.get('stage', '–')} | {r['wall_s']:.0f} |")
    first = runs[0] if runs else {}
    notes = [f"GPU {first.get('gpu')} ({first.get('device')}), offline proposer, stage {first.get('stage')}, "
             f"{first.get('samples')} samples a round, at most {first.get('max_candidates')} proposals a run; "
             f"the run's objective clock: {first.get('objective')}. \"found after\": proposals judged when the best "
             "was (0: the starting kernel)."] if runs else []
    cut = [f"{r['problem']} {r['search']}" for r in runs if r["max_candidates"] and r["judged"] < r["max_candidates"]]
    if cut:
        notes.append("Stopped before the budget (time, or the stage ladder): " + ", ".join(cut) + ".")
    if any(r["best"] and r["best"].get("meaningful") is False for r in runs):
        notes.append("CPU mode: the times say nothing about a GPU.")
    return "\n".join(out + [""] + notes)


def main(argv: list[str]) -> int:
    if argv[:1] == ["record"] and len(argv) == 6:
        _, root, run_id, search, wall_s, out = argv
        path = Path(out)
        runs = json.loads(path.read_text()) if path.is_file() else []
        runs.append(record(root, run_id, search, float(wall_s)))
        path.write_text(json.dumps(runs, indent=2) + "\n")
        return 0
    if argv[:1] == ["table"] and len(argv) == 2:
        runs = [r for p in sorted(Path(argv[1]).glob("search_*.json")) for r in json.loads(p.read_text())]
        print(table(runs))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
