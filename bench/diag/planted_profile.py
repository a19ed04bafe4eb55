"""Profile each planted GAP kind (bench/diag/planted_gap.py) with ncu the way `agent profile` does, and record the
order of its findings.

    python bench/diag/planted_profile.py OUT [--kinds a,b,...] [--timeout S] [--full-size|--size N,C,H,W]

For each kind, in its own processes (one failure never stops the others; each step has a timeout):
  1. check: the forward against torch's mean at the size profiled (a wrong kernel's profile says nothing);
  2. time: launches per forward (torch.profiler's CUDA kernels, no ncu), the device clock (CUDA events around calls
     queued back to back) and the latency clock (one synchronized call), as the harness's Timing carries them;
  3. profile: ncu with agent.profiler.ncu_argv's own flags and metrics (stage set + the diagnosis's counters, the
     launch cap per kernel name), around one forward in the NVTX range agent_profile after a warm-up forward;
  4. diagnose: agent.diagnosis on the report and the timing; OUT/KIND.ncu-rep, OUT/KIND.json (the findings in their
     order with evidence and gain, and the prompt's [DIAGNOSIS] order), and a table on stdout; OUT/summary.json;
     OUT/planted.tgz holds them all.

Needs a GPU, ncu, torch and triton, and this checkout on PYTHONPATH (or run from its root). Exit 0 if every kind
was profiled and diagnosed, 1 if any failed (the table says which and why).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO)]


def child(kind: str, step: str, shape: tuple[int, ...], nvtx: str) -> None:
    """One step for one kind, in this process (ncu runs `profile` as its application): torch and triton only."""
    import torch

    from planted_gap import forward

    torch.manual_seed(0)
    x = torch.rand(*shape, device="cuda")
    if step == "check":
        want = (x.double() * 0.5).mean(dim=(2, 3))
        got = forward(kind, x).double()
        torch.cuda.synchronize()
        err = ((got - want).abs().max() / want.abs().max()).item()
        print(json.dumps({"rel_err": err}))
        if not err < 1e-4:
            raise SystemExit(f"{kind}: wrong result, relative error {err:.2e}")
    elif step == "time":
        print(json.dumps(_time(kind, x)))
    elif step == "profile":
        forward(kind, x)  # compiles, outside the range
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(nvtx)
        forward(kind, x)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def _time(kind: str, x) -> dict:
    import statistics

    import torch

    from planted_gap import forward

    for _ in range(3):
        forward(kind, x)
    torch.cuda.synchronize()
    launches = None
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            forward(kind, x)
            torch.cuda.synchronize()
        launches = sum(1 for e in prof.events() if e.device_type.name == "CUDA" and e.name.startswith("gap_"))
    except Exception as e:  # noqa: BLE001 - the count is a nicety: the rest of the timing stands without it
        print(f"torch.profiler failed: {e}", file=sys.stderr)
    calls = 5 if kind == "launches" else 20
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        forward(kind, x)
    end.record()
    torch.cuda.synchronize()
    device_ms = start.elapsed_time(end) / calls
    latency, host = [], []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        forward(kind, x)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        latency.append((time.perf_counter() - t0) * 1e3)
        host.append((t1 - t0) * 1e3)
    return {"device_ms": device_ms, "latency_ms": statistics.median(latency), "host_ms": statistics.median(host),
            "launches": launches}


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def one(kind: str, out: Path, shape: tuple[int, ...], timeout: float) -> dict:
    """Every step for one kind; the record says how far it got and why it stopped."""
    from agent.diagnosis import DIAGNOSIS_METRICS, DiagnosisInput, diagnose, for_prompt
    from agent.ncu import read_report, stage_metric_set
    from agent.profiler import NVTX_RANGE, ProfileRequest, find_ncu, ncu_argv
    from agent.problems import load_problem
    from agent.schema import Timing
    from agent.stages import get_stage
    from planted_gap import kernel_names

    rec: dict = {"kind": kind, "ok": False}
    me = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--size", ",".join(map(str, shape)),
          "--nvtx", NVTX_RANGE]
    started = time.monotonic()
    try:
        for step in ("check", "time"):
            p = _run([*me, "--step", step], timeout)
            if p.returncode != 0:
                rec["error"] = f"{step}: {_last_line(p.stderr) or f'exit {p.returncode}'}"
                return rec
            rec[step] = json.loads(_last_line(p.stdout))
        ncu = find_ncu()
        if ncu is None:
            rec["error"] = "ncu not found"
            return rec
        stage = get_stage("memory-fusion")
        req = ProfileRequest(code="", problem=load_problem("gap44"), stage=stage, out=out / f"{kind}.ncu-rep")
        argv = ncu_argv(ncu, req, kernel_names(kind), out / kind) + [*me, "--step", "profile"]
        t0 = time.monotonic()
        p = _run(argv, timeout)
        rec["ncu_s"] = round(time.monotonic() - t0, 1)
        if p.returncode != 0 or not (out / f"{kind}.ncu-rep").exists():
            rec["error"] = f"ncu: {_last_line(p.stderr) or _last_line(p.stdout) or f'exit {p.returncode}'}"
            return rec
        profile = read_report(out / f"{kind}.ncu-rep",
                              [*stage_metric_set(stage), *(m for m in DIAGNOSIS_METRICS if m not in stage_metric_set(stage))])
        t = rec["time"]
        timing = Timing(objective="device", candidate_ms=t["device_ms"], candidate_spread_pct=0.0,
                        device_ms=t["device_ms"], latency_ms=t["latency_ms"], host_ms=t["host_ms"],
                        launches=t["launches"], repeats=1, meaningful=True)
        from agent.catalog import closest_gpu

        gpu = closest_gpu(profile.gpu) if profile.gpu else None
        found = diagnose(DiagnosisInput(profile=profile, gpu=gpu, timing=timing))
        rec["gpu"] = profile.gpu
        rec["launches_profiled"] = {k.name: k.launches for k in profile.kernels.values()}
        rec["findings"] = [f.model_dump(mode="json") for f in found]
        rec["order"] = [f.kind for f in found]
        rec["prompt_order"] = [f.kind for f in for_prompt(profile, timing)]
        rec["report_only_order"] = [f.kind for f in diagnose(DiagnosisInput(profile=profile, gpu=gpu))]
        rec["ok"] = True
    except subprocess.TimeoutExpired as e:
        rec["error"] = f"timed out after {timeout:g} s ({' '.join(map(str, e.cmd))[-80:]})"
    except Exception as e:  # noqa: BLE001 - one kind's failure is recorded; the others still run
        rec["error"] = f"{type(e).__name__}: {e}"[:300]
    finally:
        rec["wall_s"] = round(time.monotonic() - started, 1)
        (out / f"{kind}.json").write_text(json.dumps(rec, indent=2))
    return rec


def main() -> int:
    from planted_gap import FULL_SHAPE, KINDS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per step of one kind (default 240)")
    ap.add_argument("--size", default=",".join(map(str, FULL_SHAPE)), help="N,C,H,W (default gap44's GAP input)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--step", help=argparse.SUPPRESS)
    ap.add_argument("--nvtx", default="agent_profile", help=argparse.SUPPRESS)
    args = ap.parse_args()
    shape = tuple(int(v) for v in args.size.split(","))
    if args.child:
        child(args.child, args.step, shape, args.nvtx)
        return 0
    if args.out is None:
        ap.error("OUT (a folder for the reports and JSON) is required")
    args.out.mkdir(parents=True, exist_ok=True)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        ap.error(f"unknown kinds {', '.join(unknown)}; known: {', '.join(KINDS)}")
    records = []
    for kind in kinds:
        rec = one(kind, args.out, shape, args.timeout)
        records.append(rec)
        first = rec.get("order", ["-"])[0] if rec.get("order") else "-"
        print(f"{kind:18} {'ok ' if rec['ok'] else 'FAIL'} {rec['wall_s']:6.1f} s  first: {first:18} "
              f"{' > '.join(rec.get('order', [])[:6]) if rec['ok'] else rec.get('error', '')}", flush=True)
    (args.out / "summary.json").write_text(json.dumps(
        {r["kind"]: {"ok": r["ok"], "order": r.get("order"), "prompt_order": r.get("prompt_order"),
                     "error": r.get("error"), "wall_s": r["wall_s"], "ncu_s": r.get("ncu_s")} for r in records},
        indent=2))
    _archive(args.out)
    return 0 if all(r["ok"] for r in records) else 1


def _archive(out: Path) -> None:
    """Everything in one file, OUT/planted.tgz (a device returns a few files per call, not a folder of 25)."""
    import tarfile

    with tarfile.open(out / "planted.tgz", "w:gz") as tar:
        for f in sorted(out.iterdir()):
            if f.is_file() and f.suffix in (".ncu-rep", ".json"):
                tar.add(f, arcname=f.name)


if __name__ == "__main__":
    sys.exit(main())
