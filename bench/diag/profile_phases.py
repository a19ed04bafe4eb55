"""Diagnosis (issue 36, item 2): where one ncu profile's ~11 s go, and how much of it several at once overlap.

On the GPU: `python bench/diag/profile_phases.py` profiles gap44's starting kernel and the offline memory-fusion
best (agent.profiler.profile, the loop's stage set) one at a time, then three at once (agent.profileahead runs up
to three: each shares the GPU's lock until its replays), then once without ncu's SourceCounters section. Prints
each profile's phases (agent.profiler.profile_phases: start, imports, compile, gpu wait, replays, exit, read) and
the walls; then one started early (agent.profilewarm) and released 12 s later: the seconds from its release.
Writes $OUT/profile_phases.json.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
OUT = Path(os.environ.get("OUT", "."))


def main() -> int:
    from agent.problems import load_problem, starting_code
    from agent.profiler import ProfileRequest, profile
    from agent.stages import get_stage

    problem, stage = load_problem("gap44"), get_stage("memory-fusion")
    codes = {"seed": starting_code(problem) or "",
             "offline best": (REPO / "bench" / "candidates" / "gap44_offline_memory_fusion.py").read_text()}
    work = Path(tempfile.mkdtemp(prefix="agent-profile-phases-"))
    rows: list[dict] = []

    def one(label: str, name: str, i: int, **kw) -> dict:
        t0 = time.monotonic()
        prof = profile(ProfileRequest(code=codes[name], problem=problem, stage=stage,
                                      out=work / f"{label}-{i}.ncu-rep", timeout_s=300, **kw))
        row = {"run": label, "code": name, "wall_s": round(time.monotonic() - t0, 2), "phases": prof.phases}
        print(f"{label:24s} {name:14s} {row['wall_s']:6.2f} s  {prof.phases}", flush=True)
        return row

    for name in codes:
        rows.append(one("alone", name, 0))
    t0 = time.monotonic()
    with ThreadPoolExecutor(3) as pool:
        rows += list(pool.map(lambda i: one("three at once", "offline best", i), range(3)))
    together = time.monotonic() - t0
    print(f"three at once: {together:.2f} s in all", flush=True)
    rows.append(one("no SourceCounters", "offline best", 0, source_counters=False))
    # started early (agent.profilewarm): the run waits for its code while the round is judged, then costs the rest
    from agent.profilewarm import WarmRuns

    warm = WarmRuns()
    warm.start(ProfileRequest(code=codes["offline best"], problem=problem, stage=stage, out=work / "early.ncu-rep",
                              timeout_s=300))
    time.sleep(12)  # a round's evaluations
    run = warm.take(codes["offline best"] + "\n", stage.name)
    assert run is not None, "the run started early ended before its code came"
    t0 = time.monotonic()
    run.release(codes["offline best"] + "\n", work / "early.ncu-rep")
    prof = run.finish()
    rows.append({"run": "started early", "code": "offline best", "wall_s": round(time.monotonic() - t0, 2),
                 "phases": prof.phases})
    print(f"{'started early':24s} {'offline best':14s} {rows[-1]['wall_s']:6.2f} s from its release  {prof.phases}",
          flush=True)
    warm.close()
    (OUT / "profile_phases.json").write_text(json.dumps({"rows": rows, "three_at_once_s": round(together, 2)},
                                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
