"""How close each legitimate manifest answer comes to its tolerance (CPU mode): worst error / tolerance over its
checks, largest first. The inputs' seeds are salted per cache, so a suite run draws new inputs each time: an honest
answer near its tolerance is a flaky test (KernelBench #23 failed CI once at 524x a lucky tolerance). Run it after
a change to validation or to the manifest's legitimate answers; anything above ~0.3 deserves a look.

    python bench/diag/legit_margins.py        (about 6 minutes on 2 cores)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from test_harness import MANIFEST, answer, request  # noqa: E402

from agent.harness import evaluate_many  # noqa: E402


def main() -> None:
    legit = {n: c for n, c in MANIFEST.items() if c["verdict"] == "correct"}
    reqs = [request(answer(c), problem=c.get("problem", "gap44"), stage=c.get("stage", "memory-fusion"),
                    timeout_s=c.get("timeout_s", 120)) for c in legit.values()]
    rows = []
    for name, r in zip(legit, evaluate_many(reqs)):
        ratios = [(c.error or 0.0) / c.tolerance for c in r.checks if c.tolerance]
        rows.append((max(ratios, default=float("inf")), name, r.verdict.value, r.message[:100]))
    for ratio, name, verdict, message in sorted(rows, key=lambda row: -row[0]):
        print(f"{ratio:9.3g}  {verdict:14s} {name:55s} {message}")
    wrong = [name for _, name, verdict, _ in rows if verdict != "correct"]
    print(f"{len(rows)} legitimate answers, {len(wrong)} not correct{': ' + ', '.join(wrong) if wrong else ''}")


if __name__ == "__main__":
    main()
