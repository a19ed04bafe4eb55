"""Re-record the CPU run that tests/test_report.py renders (a real `agent run`, CPU mode): run from the repository root,
    python tests/data/report_run/record.py
It replays these answers through the whole harness (`--llm replay:`) with `--stage auto --patience 1`, so the run has
a new best (iteration 1), failures of six kinds, a round without gain and the stage change it causes (iteration 3),
and copies the recorded run (its files only: the index is rebuilt from them) to tests/data/report_run/candidates/.
Takes about two minutes on two cores."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CANDIDATES = REPO / "tests" / "candidates"
ROUNDS = [  # three answers per iteration: (file, what it is)
    [CANDIDATES / "syntax_error.py", CANDIDATES / "wrong_scale.py", HERE / "answers" / "one_block.py"],
    [CANDIDATES / "intermediate_store.py", CANDIDATES / "compile_error.py", HERE / "answers" / "narrow_tile.py"],
    [CANDIDATES / "no_code.md", CANDIDATES / "pure_pytorch.py", CANDIDATES / "correct.py"],
]


def main() -> int:
    sys.path.insert(0, str(REPO))
    from agent.runconfig import RunConfig
    from agent.schema import Answer, Candidate, EvalResult, Verdict
    from agent.store import Store

    root = Path(tempfile.mkdtemp(prefix="report-run-"))
    with Store(root) as s:  # the answers to replay, as an earlier run's
        src = s.create_run(RunConfig(problem="gap44", llm="offline"), gpu="H100", device="cpu")
        for i, files in enumerate(ROUNDS, start=1):
            s.record_iteration(src, i, "memory-fusion", "", "requested", None)
            for k, f in enumerate(files, start=1):
                text = f.read_text()
                if f.suffix == ".py":
                    text = f"Here is the kernel ({f.name}).\n\n```python\n{text}```\n"
                s.record_candidate(Candidate(id=s.candidate_id(src, i, k), run_id=src, iteration=i, index=k,
                                             stage="memory-fusion", answer=Answer(text=text, model="replayed"),
                                             result=EvalResult(verdict=Verdict.NO_CODE, message="not evaluated")))
        s.finish_run(src)
    agent = [sys.executable, "-m", "agent"]
    subprocess.run([*agent, "run", "--root", str(root), "--llm", f"replay:{src}", "--device", "cpu", "--gpu", "h100",
                    "--stage", "auto", "--patience", "1", "--iterations", str(len(ROUNDS)),
                    "--samples", str(len(ROUNDS[0])), "--quiet"], check=True, cwd=REPO)
    subprocess.run([*agent, "runs", "rm", src, "--root", str(root)], check=True, cwd=REPO)
    (run,) = [d for d in (root / "candidates").iterdir() if d.is_dir() and not d.name.startswith(".")]
    with Store(root) as s:  # CPU timings are noisy: the test wants a new best beyond noise and a stage change
        bests = {it.best_before for it in s.iterations(run.name)} | {s.get_run(run.name).best}
        stages = {it.stage for it in s.iterations(run.name)}
    if len(bests - {None}) < 2 or len(stages) < 2:
        print(f"run {run.name} has {len(bests - {None})} best(s) and stages {sorted(stages)}: record it again")
        return 1
    dest = HERE / "candidates"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir()
    shutil.copytree(run, dest / run.name)
    shutil.rmtree(root)
    print(f"recorded run {run.name} into {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
