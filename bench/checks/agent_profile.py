"""GPU check for `agent profile` (issue 5): profile the seed's starting kernel and a faster candidate with ncu.

Run on an H100 with ncu on PATH (or in /usr/local/cuda/bin, /opt/nvidia/nsight-compute/*/), from the repo root:

    python bench/checks/agent_profile.py            # writes under $OUT (or ./gpu_profile_check_out)

For each candidate (agent/problems/gap44_start.py, bench/candidates/gap44_rowsum.py) it runs
1. the worker's profile mode without ncu, in the same sandbox (the candidate's own cost: start-up, JIT, warm-up),
2. profiler.profile with the stage set (memory-fusion), 3. with --set full,
then prints the metrics, the bottleneck, the rule results' titles, the wall time each ncu run took and how much
ncu added over (1); compares the seed's stage profile with the fixture (tests/data/ncu/seed_h100_metrics.ncu-rep:
grid 32, DRAM 23.51 %, 685.8 µs); and runs `agent profile` + `agent ncu --format prompt` once through the CLI.
Files under $OUT (6): the four .ncu-rep reports, summary.json (every parsed profile, wall times, diffs), cli.txt.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agent.ncu import diff, read_report, stage_metric_set  # noqa: E402
from agent.problems import load_problem  # noqa: E402
from agent.profiler import ProfileError, ProfileRequest, find_ncu, profile  # noqa: E402
from agent.schema import Stage  # noqa: E402
from agent.stages import get_stage  # noqa: E402

FIXTURE = REPO / "tests" / "data" / "ncu" / "seed_h100_metrics.ncu-rep"
CANDIDATES = {"seed": REPO / "agent" / "problems" / "gap44_start.py", "rowsum": REPO / "bench" / "candidates" / "gap44_rowsum.py"}
def stage() -> Stage:
    return get_stage("memory-fusion")


def plain_run(code: str, problem) -> dict:
    """The worker's profile mode without ncu, sandboxed the same way: what the candidate costs by itself."""
    from agent.harness.job import prepare_job, read_result
    from agent.harness.runner import run_job

    workdir = Path(tempfile.mkdtemp(prefix="agent-plain-"))
    try:
        job = prepare_job(workdir, "profile", problem, code=code, device="cuda")
        t0 = time.monotonic()
        res = run_job(workdir, job, "cuda", 300, None, [], None)
        wall = time.monotonic() - t0
        result = read_result(workdir / "result.json")
        return {"wall_s": round(wall, 2), "ok": bool(result and result.ok), "rc": res.returncode,
                "isolation": res.isolation, "stderr_tail": res.stderr[-400:]}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def fmt_metrics(metrics: dict) -> str:
    return ", ".join(f"{k.split('.')[0]}={v:.2f}" if isinstance(v, float) else f"{k.split('.')[0]}={v}" for k, v in metrics.items())


def profile_candidate(name: str, path: Path, problem, st, work: Path, out: Path) -> tuple[dict, bool]:
    """One candidate: a plain sandboxed run, then `agent profile`'s stage and full sets (reports copied to out)."""
    ok = True
    code = path.read_text()
    entry: dict = {"file": str(path.relative_to(REPO))}
    print(f"\n=== {name} ({entry['file']})")
    plain = plain_run(code, problem)
    entry["plain"] = plain
    print(f"  without ncu: {plain['wall_s']:.1f} s (ok={plain['ok']}, isolation {plain['isolation']})"
          + ("" if plain["ok"] else f"\n  stderr: {plain['stderr_tail']}"))
    for metric_set in ("stage", "full"):
        report = work / f"{name}_{metric_set}.ncu-rep"
        req = ProfileRequest(code=code, problem=problem, stage=st, metric_set=metric_set, out=report, timeout_s=300)
        try:
            prof = profile(req)
        except ProfileError as e:
            ok = False
            print(f"  {metric_set}: FAIL ({e.kind}) {e}")
            entry[metric_set] = {"error": str(e), "kind": e.kind}
            continue
        shutil.copyfile(report, out / report.name)
        added = prof.wall_s - plain["wall_s"]
        print(f"  {metric_set} set: ncu run {prof.wall_s:.1f} s (adds {added:+.1f} s over the plain run), "
              f"GPU {prof.gpu}, metric_set {prof.metric_set}")
        for kname, k in prof.kernels.items():
            print(f"    {kname}: launches {k.launches}, grid {k.grid}, block {k.block}")
            print(f"      {fmt_metrics(k.metrics)}")
            if k.rules:
                print(f"      rules: {', '.join(r.title or r.rule for r in k.rules)}")
        print(f"    bottleneck: {prof.bottleneck.reason if prof.bottleneck else None}")
        entry[metric_set] = {"wall_s": prof.wall_s, "added_s": round(added, 2), "profile": prof.model_dump(mode="json")}
    return entry, ok


def seed_against_fixture(work: Path, st, summary: dict) -> None:
    """The seed's stage profile against the H100 fixture (same kernel, same GPU model), and seed -> rowsum."""
    seed_report = work / "seed_stage.ncu-rep"
    if seed_report.exists():
        fixture = read_report(FIXTURE, stage_metric_set(st))
        fresh = read_report(seed_report, stage_metric_set(st))
        deltas = diff(fixture, fresh)
        summary["seed_vs_fixture"] = [d.model_dump(mode="json") for d in deltas]
        print("\n=== seed (stage set) vs fixture")
        for d in deltas:
            pct = f"{d.pct:+.1f} %" if d.pct is not None else "—"
            print(f"  {d.metric:55s} fixture {d.before!s:>22} now {d.after!s:>22} {pct:>9} {d.direction}")
        k = next(iter(fresh.kernels.values()))
        dram = k.metrics.get("dram__throughput.avg.pct_of_peak_sustained_elapsed", 0)
        dur = k.metrics.get("gpu__time_duration.sum", 0) / 1e3
        checks = {"grid 32": k.metrics.get("launch__grid_size") == 32,
                  "DRAM 23.5 % ± 3": abs(dram - 23.51) < 3, "duration 686 µs ± 10 %": abs(dur - 685.8) < 68.6,
                  "latency-bound": bool(fresh.bottleneck and fresh.bottleneck.kind == "latency-bound")}
        for label, passed in checks.items():
            print(f"  {'PASS' if passed else 'WARN'} {label}")
    rowsum_report = work / "rowsum_stage.ncu-rep"
    if rowsum_report.exists() and seed_report.exists():
        print("\n=== seed → rowsum (stage set)")
        for d in diff(read_report(seed_report, stage_metric_set(st)), read_report(rowsum_report, stage_metric_set(st))):
            pct = f"{d.pct:+.1f} %" if d.pct is not None else "—"
            print(f"  {d.kernel[:60]:60s} {d.metric[:45]:45s} {d.before!s:>20} → {d.after!s:>20} {pct:>9} {d.direction}")



def through_the_cli(work: Path, st, out: Path) -> None:
    """Once through the CLI: `agent profile` then `agent ncu --format prompt`; the transcript to out/cli.txt."""
    cli_out = []
    cli_report = work / "cli_rowsum.ncu-rep"
    for argv in (["profile", str(CANDIDATES["rowsum"]), "--problem", "gap44", "--stage", st.name, "-o", str(cli_report)],
                 ["ncu", str(cli_report), "--format", "prompt", "--stage", st.name]):
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "agent", *argv], capture_output=True, text=True, cwd=REPO, timeout=400)
        cli_out.append(f"$ agent {' '.join(argv)}   # exit {r.returncode}, {time.monotonic() - t0:.1f} s\n{r.stdout}{r.stderr}")
    (out / "cli.txt").write_text("\n".join(cli_out))
    print("\n=== CLI\n" + "\n".join(cli_out)[-4000:])


def main() -> int:
    out = Path(os.environ.get("OUT") or "gpu_profile_check_out")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="agent-gpu-check-"))
    ncu = find_ncu()
    print(f"ncu: {ncu}")
    if ncu is None:
        print("FAIL: ncu not found")
        return 1
    print(subprocess.run([str(ncu), "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1])
    try:
        import torch
        import triton

        print(f"torch {torch.__version__}, triton {triton.__version__}, GPU {torch.cuda.get_device_name(0)}")
    except Exception as e:  # noqa: BLE001
        print(f"torch/triton: {e}")

    st = stage()
    print(f"stage {st.name}: {stage_metric_set(st)}")
    problem = load_problem("gap44")
    summary: dict = {"ncu": str(ncu), "stage_metrics": stage_metric_set(st), "candidates": {}}
    ok = True
    for name, path in CANDIDATES.items():
        entry, passed = profile_candidate(name, path, problem, st, work, out)
        ok = ok and passed
        summary["candidates"][name] = entry
    seed_against_fixture(work, st, summary)
    through_the_cli(work, st, out)

    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    shutil.rmtree(work, ignore_errors=True)
    print(f"\nwrote {sorted(p.name for p in out.iterdir())} to {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001 - a GPU run is precious: show everything
        traceback.print_exc()
        sys.exit(1)
