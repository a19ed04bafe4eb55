"""Where a host-bound forward's time goes, and the gap44 closed form's device time over its tuning knobs (GPU).

Host: the issue time of one call (no synchronisation between calls; the median of per-call perf_counter deltas) for a
trivial Triton kernel with few and with many arguments, torch.empty, and the whole forwards of the one-launch
candidates; latency: one synchronised call after a reading L2 flush (the harness's latency clock, without the
harness). Device: CUDA events around each call after a reading flush, for each configuration of the offline
proposer's closed form (agent/data/kernels/convt2d_gap.py.j2), checked against the fp64 reference first.

Usage (GPU machine, repo root): python bench/diag/launch_cost.py OUT.json
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from agent.problems import load_module, load_problem  # noqa: E402


@triton.jit
def one_arg(x_ptr):
    tl.store(x_ptr + tl.program_id(0), 1.0)


@triton.jit
def many_constexpr(a, b, c, d, e, f, s, K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr,
                   K4: tl.constexpr, K5: tl.constexpr, K6: tl.constexpr, K7: tl.constexpr, K8: tl.constexpr,
                   K9: tl.constexpr, K10: tl.constexpr, K11: tl.constexpr, K12: tl.constexpr, K13: tl.constexpr,
                   K14: tl.constexpr, K15: tl.constexpr, K16: tl.constexpr, K17: tl.constexpr, K18: tl.constexpr,
                   K19: tl.constexpr, K20: tl.constexpr, K21: tl.constexpr, K22: tl.constexpr, K23: tl.constexpr,
                   K24: tl.constexpr):
    tl.store(a + tl.program_id(0), s)


@triton.jit
def many_runtime(a, b, c, d, e, f, s, i0, i1, i2, i3, i4, i5, i6, i7, i8, i9, i10, i11, f0,
                 K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr, K4: tl.constexpr,
                 K5: tl.constexpr, K6: tl.constexpr, K7: tl.constexpr, K8: tl.constexpr):
    tl.store(a + tl.program_id(0), s)


def issue_us(fn, n=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return round(statistics.median(ts), 2)


def latency_us(fn, flush, n=300):
    ts = []
    for _ in range(n):
        flush.sum()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e6)
    return round(statistics.median(ts), 1), round(statistics.quantiles(ts, n=5)[0], 1), round(
        statistics.quantiles(ts, n=5)[-1], 1)


def device_us(fn, flush, n=40):
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        flush.sum()
        torch.cuda._sleep(200_000)  # the host queues the call before the start event runs
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    ts = sorted(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))
    return round(statistics.median(ts), 2), round(ts[len(ts) // 5], 2), round(ts[4 * len(ts) // 5], 2)


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def model_pair(cand):
    problem = load_module(load_problem("gap44").path)
    torch.manual_seed(0)
    ref = problem.Model(*problem.get_init_inputs()).cuda()
    new = cand.ModelNew(*problem.get_init_inputs()).cuda()
    new.load_state_dict(ref.state_dict())
    x = problem.get_inputs()[0].cuda()
    return ref, new, x


def main(out_path: str) -> None:
    res: dict = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__}
    flush = torch.ones(256 * (1 << 20) // 4, device="cuda")
    buf = torch.zeros(1024, device="cuda")
    ints = list(range(1, 13))
    host = {
        "triton, 1 argument": lambda: one_arg[(1,)](buf),
        "triton, 7 runtime + 25 constexpr": lambda: many_constexpr[(1,)](buf, buf, buf, buf, buf, buf, 1.0,
                                                                       *range(25)),
        "triton, 20 runtime + 9 constexpr": lambda: many_runtime[(1,)](buf, buf, buf, buf, buf, buf, 1.0, *ints, 0.5,
                                                                     *range(9)),
        "torch.empty(2048)": lambda: torch.empty(2048, device="cuda"),
    }
    res["issue_us"] = {k: issue_us(f) for k, f in host.items()}
    print(json.dumps(res, indent=1), flush=True)

    cands = {"one_launch": REPO / "bench/candidates/gap44_algebraic_one_launch.py",
             "two_launch": REPO / "bench/candidates/gap44_algebraic.py"}
    res["forward"] = {}
    for name, path in cands.items():
        cand = load(path)
        ref, new, x = model_pair(cand)
        with torch.no_grad():
            truth = ref.double()(x.double())
            ref.float()
            err = ((new(x).double() - truth).abs().max() / truth.abs().max()).item()
            eager_dev = device_us(lambda: ref(x), flush, 10)
            res["forward"][name] = {"rel_err": err, "issue_us": issue_us(lambda: new(x), 500),
                                    "latency_us": latency_us(lambda: new(x), flush),
                                    "device_us": device_us(lambda: new(x), flush), "eager_device_us": eager_dev,
                                    "eager_latency_us": latency_us(lambda: ref(x), flush, 50)}
        print(name, res["forward"][name], flush=True)

    from agent.catalog import find_gpu
    from agent.offline import Variant, recognise, render

    plan, h100, tmp = recognise(load_problem("gap44")), find_gpu("h100"), Path("/var/tmp/launch_cost")
    tmp.mkdir(exist_ok=True)
    ref, _, x = model_pair(load(cands["one_launch"]))
    with torch.no_grad():
        truth = ref.double()(x.double())
    ref.float()
    res["sweep"] = []
    for bh, bw, warps, stages in itertools.product([4, 8, 16, 32], [128], [2, 4, 8], [1, 3]):
        row = {"BH": bh, "BW": bw, "warps": warps, "stages": stages}
        path = tmp / f"v_{bh}_{bw}_{warps}_{stages}.py"
        path.write_text(render(plan, Variant(family="algebraic", block=bh, split=bw, warps=warps, stages=stages),
                               h100))
        _, new, _ = model_pair(load(path))
        try:
            with torch.no_grad():
                err = ((new(x).double() - truth).abs().max() / truth.abs().max()).item()
                row |= {"rel_err": err, "device_us": device_us(lambda: new(x), flush)}
                if err < 1e-5:
                    row |= {"issue_us": issue_us(lambda: new(x), 300), "latency_us": latency_us(lambda: new(x), flush, 100)}
        except Exception as e:  # a configuration that does not compile (registers, shared memory) is a finding
            row["error"] = f"{type(e).__name__}: {e}"[:200]
        res["sweep"].append(row)
        print(row, flush=True)
    best = min((r for r in res["sweep"] if "issue_us" in r), key=lambda r: r["device_us"][0])
    res["best"] = best
    print("best", best)
    Path(out_path).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
