"""GPU check of the two clocks and of evaluation speed (issue 15), for an H100: `python bench/suite/clocks.py`.

1. plain: this script times the exported algebraic rewrite (bench/candidates/gap44_algebraic.py), eager and
   torch.compile at gap44's full size, each two ways, with code of its own (not agent.harness.worker.timing):
   device  = CUDA events around calls queued back to back, a reading L2 flush before each;
   latency = flush, synchronize, then one call timed on the host clock until synchronize returns;
   medians of REPS calls (latency: calls over about a second, at most LATENCY_MAX), fresh inputs each call.
2. harness: `agent eval --json` of the same file, twice, with a fresh cache directory: cold (it computes the truths
   and baselines) and warm (a second process reuses both); wall time of each `agent eval` process, its phases.
3. agreement: harness vs plain, candidate / eager / compile on both clocks, in percent.
4. a hang at full size (tests/candidates/infinite_loop.py) under the scaled limit: how long `agent eval` takes.
5. the row kernel (bench/candidates/gap44_rowsum.py), GPU-bound: both clocks should agree with each other.
Results: $OUT/gpu_clocks_check.json (or ./); a summary is printed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
OUT = Path(os.environ.get("OUT", "."))
REPS = 100
LATENCY_WINDOW_S, LATENCY_MAX = 1.0, 1000
ALGEBRAIC = REPO / "bench" / "candidates" / "gap44_algebraic.py"
ROWSUM = REPO / "bench" / "candidates" / "gap44_rowsum.py"
HANG = REPO / "tests" / "candidates" / "infinite_loop.py"


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def plain_clocks(fn, x, flush) -> dict:
    """Both clocks of fn(x), measured here."""
    import torch

    with torch.no_grad():
        for _ in range(10):
            x.normal_()
            fn(x)
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
        for i in range(REPS):
            x.normal_()
            flush.sum()
            starts[i].record()
            fn(x)
            ends[i].record()
        torch.cuda.synchronize()
        device = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        # the latency samples span about a second (a host-bound call's dispatch time drifts), at most LATENCY_MAX
        t_end, latency = time.perf_counter() + LATENCY_WINDOW_S, []
        while len(latency) < LATENCY_MAX and (time.perf_counter() < t_end or len(latency) < REPS):
            x.normal_()
            flush.sum()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn(x)
            torch.cuda.synchronize()
            latency.append((time.perf_counter() - t0) * 1000)
    return {"device_ms": statistics.median(device), "latency_ms": statistics.median(latency)}


def plain(with_compile: bool = True) -> dict:
    """The algebraic rewrite, eager and (with_compile) torch.compile at gap44's full size, both clocks, in this process."""
    import copy

    import torch

    problem = _module(REPO / "agent" / "problems" / "gap44.py", "gap44_plain")
    cand = _module(ALGEBRAIC, "algebraic_plain")
    torch.manual_seed(0)
    ref = problem.Model(*problem.get_init_inputs()).cuda().eval()
    new = cand.ModelNew(*problem.get_init_inputs()).cuda().eval()
    new.load_state_dict(ref.state_dict(), strict=False)
    x = problem.get_inputs()[0].cuda()
    flush = torch.ones(256 << 18, device="cuda")
    out = {"candidate": plain_clocks(new, x, flush), "eager": plain_clocks(ref, x, flush)}
    if not with_compile:
        return out
    t0 = time.monotonic()
    compiled = torch.compile(copy.deepcopy(ref))
    out["compile"] = plain_clocks(compiled, x, flush)
    out["compile"]["compile_s"] = round(time.monotonic() - t0, 1)
    return out


def agent_eval(path: Path, cache: Path, *extra: str, timeout: float = 400) -> dict:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "agent", "eval", str(path), "--problem", "gap44", "--stage",
                        "algebraic", "--device", "cuda", "--cache-dir", str(cache), "--json", *extra],
                       capture_output=True, text=True, timeout=timeout, cwd=REPO)
    wall = time.monotonic() - t0
    try:
        result = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"wall_s": round(wall, 1), "error": (p.stderr or p.stdout)[-1500:]}
    t = result.get("timing") or {}
    return {"wall_s": round(wall, 1), "verdict": result["verdict"], "message": result["message"][:300],
            "phases": result.get("phases"), "timing": {k: t.get(k) for k in (
                "device_ms", "device_spread_pct", "latency_ms", "latency_spread_pct", "host_ms", "launches",
                "eager_device_ms", "eager_latency_ms", "compile_device_ms", "compile_latency_ms",
                "device_speedup_vs_eager", "latency_speedup_vs_eager", "note")}}


def pct(a: float | None, b: float | None) -> float | None:
    return round(100 * (a - b) / b, 1) if a is not None and b else None


def main() -> int:
    import torch

    report: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": REPS}
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "gpu_clocks_check.json"

    def save() -> None:
        path.write_text(json.dumps(report, indent=1))

    report["plain"] = plain()
    save()
    print("plain:", json.dumps(report["plain"]), flush=True)
    cache = Path(tempfile.mkdtemp(prefix="agent-clocks-cache-", dir="/opt" if os.access("/opt", os.W_OK) else None))
    report["cold"] = agent_eval(ALGEBRAIC, cache)
    save()
    print("cold:", json.dumps(report["cold"]), flush=True)
    report["warm"] = agent_eval(ALGEBRAIC, cache)
    save()
    print("warm:", json.dumps(report["warm"]), flush=True)
    h, p = report["warm"].get("timing") or {}, report["plain"]
    report["agreement_pct"] = {
        "candidate_device": pct(h.get("device_ms"), p["candidate"]["device_ms"]),
        "candidate_latency": pct(h.get("latency_ms"), p["candidate"]["latency_ms"]),
        "eager_device": pct(h.get("eager_device_ms"), p["eager"]["device_ms"]),
        "eager_latency": pct(h.get("eager_latency_ms"), p["eager"]["latency_ms"]),
        "compile_device": pct(h.get("compile_device_ms"), p["compile"]["device_ms"]),
        "compile_latency": pct(h.get("compile_latency_ms"), p["compile"]["latency_ms"]),
    }
    save()
    print("agreement (harness vs plain, %):", json.dumps(report["agreement_pct"]), flush=True)
    report["rowsum"] = agent_eval(ROWSUM, cache, "--stage", "memory-fusion")
    save()
    print("rowsum:", json.dumps(report["rowsum"]), flush=True)
    report["hang"] = agent_eval(HANG, cache, "--stage", "memory-fusion", timeout=300)
    save()
    print("hang:", json.dumps(report["hang"]), flush=True)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
