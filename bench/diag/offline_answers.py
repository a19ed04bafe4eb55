"""The offline proposer's first K answers for a problem and stage, judged on the GPU by `agent eval` (timing
included), each with its verdict and message. Written after the fourth session's search runs: on gap_large, 5 of
12 offline proposals were refused on an H200 though every one is correct in CPU mode, and the records did not say
why. Usage (GPU machine, repo root):
    python bench/diag/offline_answers.py PROBLEM [STAGE] [K]     (defaults: memory-fusion, 6)
Answers in $OUT/offline_<problem>/ (one file each, the variant in its name), `agent eval --json` in
$OUT/offline_<problem>.json; one line per answer on stdout: file, verdict, device and latency ms, message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agent.catalog import closest_gpu, detect_device_name, find_gpu  # noqa: E402
from agent.harness.static.extract import extract_code  # noqa: E402
from agent.offline import OfflineProposer  # noqa: E402
from agent.problems import load_problem  # noqa: E402
from agent.protocols import ProposalContext  # noqa: E402


def main(argv: list[str]) -> int:
    problem, stage = argv[0], argv[1] if len(argv) > 1 else "memory-fusion"
    k = int(argv[2]) if len(argv) > 2 else 6
    name = detect_device_name()
    proposer = OfflineProposer(load_problem(problem), closest_gpu(name) if name else find_gpu("h100"))
    answers = proposer.propose(ProposalContext(prompt="", k=k, stage=stage, code="")).answers
    out = Path(os.environ.get("OUT", ".")) / f"offline_{problem}"
    out.mkdir(parents=True, exist_ok=True)
    for i, a in enumerate(answers):
        v = proposer.variant_of(extract_code(a.text))
        tag = "_".join(str(x) for x in (v.family, v.block, v.warps, v.stages, v.split)) if v else "unknown"
        (out / f"{i:02d}_{tag}.md").write_text(a.text)
    run = subprocess.run([sys.executable, "-m", "agent", "eval", str(out), "--problem", problem, "--stage", stage,
                          "--json"], capture_output=True, text=True, cwd=REPO)
    (out.parent / f"offline_{problem}.json").write_text(run.stdout)
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        print(f"agent eval exited {run.returncode}: {run.stderr.strip()[-400:]}")
        return 1
    for r in report["results"]:
        t = r.get("timing") or {}
        print(f"{Path(r.get('file', '?')).name:40s} {r['verdict']:15s} {t.get('device_ms') or 0:8.4f} "
              f"{t.get('latency_ms') or 0:8.4f}  {r['message'][:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
