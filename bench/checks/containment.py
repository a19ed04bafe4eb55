"""GPU check of the candidate's wall and the judge (issue 14): `python bench/checks/containment.py`.

1. the wall on this machine: isolation kind, and from inside it: uid, visible processes, a planted secret in the
   parent's environment, writes outside the workdir, a setsid daemon, CUDA and a Triton JIT kernel running;
2. the judge at full size on the GPU: adversarial and legitimate candidates from tests/candidates (expected verdicts
   from its manifest), the seed's kernel and the offline proposer's kernels with timing (to compare with before);
3. ncu inside the wall: the seed, the row kernel and the algebraic rewrite profiled, harness time / ncu kernel time.
Results go to $OUT/gpu_containment_check.json; a table is printed last.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agent.harness import EvalRequest, Shared, evaluate_many  # noqa: E402
from agent.harness.wall.sandbox import isolation, run_sandboxed  # noqa: E402
from agent.problems import load_problem, starting_code  # noqa: E402
from agent.stages import get_stage  # noqa: E402

CANDIDATES = REPO / "tests" / "candidates"
MANIFEST = tomllib.loads((CANDIDATES / "manifest.toml").read_text())
SECRET = "sk-gpu-check-3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
CASES = [
    "legit_split_reduction", "legit_last_block_reduction", "legit_channels_last", "legit_bias_folded_epilogue",
    "legit_autotune_heuristics", "legit_kernel_built_in_a_factory", "legit_one_launch_per_image",
    "roundtrip_two_kernels", "roundtrip_in_a_helper", "roundtrip_atomic_add", "kernel_on_dummy_tensor",
    "kernel_copies_a_pytorch_result", "kernel_beside_matmul_pooling", "kernel_only_in_init", "memo_call_count",
    "memo_same_pointer", "forge_patch_through_type", "forge_patch_builtin_via_helper", "size_one_tile_no_loop",
    "size_at_most_64_channels", "oob_crash", "escape_torch_os", "side_stream",
]

WALL = f'''
import os, subprocess, sys, json
out = {{"uid": os.geteuid(), "procs": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}}
seen = ""
for p in os.listdir("/proc"):
    try:
        seen += open(f"/proc/{{p}}/environ").read()
    except OSError:
        pass
out["secret_seen"] = "{SECRET}" in seen + json.dumps(dict(os.environ))
wrote = []
for t in ["/etc/agent-probe", sys.prefix + "/agent-probe", "/opt/agent-probe", os.path.expanduser("~root") + "/agent-probe"]:
    try:
        open(t, "w").write("x"); wrote.append(t)
    except OSError:
        pass
out["wrote_outside"] = wrote
# a detached daemon that waits for this probe to end, then 2 s more, then writes: it must never get to write
subprocess.Popen(["setsid", "sh", "-c", "while kill -0 {{}} 2>/dev/null; do sleep 0.2; done; sleep 2; echo alive > {{}}"
                  .format(os.getpid(), os.getcwd() + "/daemon.txt")])
import torch, triton, triton.language as tl
@triton.jit
def add(x_ptr, y_ptr, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n) + 1.0, mask=o < n)
x = torch.arange(1000, device="cuda", dtype=torch.float32); y = torch.empty_like(x)
add[(4,)](x, y, 1000, B=256)
out["triton_ok"] = bool(torch.equal(y, x + 1))
out["matmul_ok"] = bool(torch.allclose((x[:64, None] @ x[None, :64]).sum(), x[:64].sum() ** 2))
print(json.dumps(out))
'''


def wall_probe() -> dict:
    os.environ["OPENAI_API_KEY"] = SECRET
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "probe.py").write_text(WALL)  # a file: @triton.jit needs the source
        r = run_sandboxed([sys.executable, str(Path(d) / "probe.py")], workdir=Path(d), timeout_s=180,
                          env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
        time.sleep(4)  # the daemon would write 2 s after the probe exits
        daemon = (Path(d) / "daemon.txt").exists()
        try:
            res = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            res = {"error": r.stderr[-800:]}
    res.update(isolation=isolation(), daemon_survived=daemon, wall_s=round(r.wall_s, 2))
    return res


def main() -> int:
    out_dir = Path(os.environ.get("OUT", "."))
    report: dict = {}
    t0 = time.time()
    report["wall"] = wall_probe()
    print("wall:", json.dumps(report["wall"]), flush=True)

    problem, stage = load_problem("gap44"), get_stage("memory-fusion")
    from agent.catalog import closest_gpu, detect_device_name

    gpu = closest_gpu(detect_device_name() or "")
    sources = {"seed": starting_code(problem) or "",
               "rowsum": (REPO / "bench/candidates/gap44_rowsum.py").read_text(),
               "offline_memory_fusion": (REPO / "bench/candidates/gap44_offline_memory_fusion.py").read_text(),
               "algebraic": (REPO / "bench/candidates/gap44_algebraic.py").read_text(),
               "correct": (CANDIDATES / "correct.py").read_text()}
    sources.update({n: (CANDIDATES / MANIFEST[n]["file"]).read_text() for n in CASES})
    expected = {n: MANIFEST[n]["verdict"] for n in CASES} | {k: "correct" for k in ("seed", "rowsum", "offline_memory_fusion", "correct")}
    expected["algebraic"] = "correct"
    shared = Shared()
    rows = []
    for name, src in sources.items():
        st = get_stage("algebraic") if name == "algebraic" else stage
        start = time.time()
        [r] = evaluate_many([EvalRequest(source=src, problem=problem, stage=st, device="cuda", time_it=True,
                                         timeout_s=240, bandwidth_gbs=gpu.memory_bandwidth_gbs)], shared)
        t = r.timing
        row = {"name": name, "verdict": r.verdict.value, "expected": expected[name], "eval_s": round(time.time() - start, 1),
               "message": r.message[:300], "ms": t.candidate_ms if t else None, "spread": t.candidate_spread_pct if t else None,
               "wall_ms": t.wall_ms if t else None, "eager_ms": t.eager_ms if t else None,
               "compile_ms": t.compile_ms if t else None, "secret_in_message": SECRET in r.message}
        rows.append(row)
        print(f"{name:34s} {row['verdict']:15s} (want {row['expected']:15s}) {row['eval_s']:5.1f}s "
              f"{'' if t is None else f'{t.candidate_ms:.4f} ms ±{t.candidate_spread_pct:.1f}%'} {r.message[:120]}",
              flush=True)
    report["verdicts"] = rows

    from agent.crosscheck import kernels_ms
    from agent.profiler import ProfileRequest, profile

    prof_rows = []
    for name in ("seed", "rowsum", "algebraic"):
        row = next(r for r in rows if r["name"] == name)
        start = time.time()
        try:
            p = profile(ProfileRequest(code=sources[name], problem=problem, stage=stage,
                                       out=out_dir / f"{name}.ncu-rep", timeout_s=240))
            k = kernels_ms(p)
            prof_rows.append({"name": name, "harness_ms": row["ms"], "ncu_kernels_ms": k,
                              "ratio": (row["ms"] / k) if row["ms"] and k else None, "profile_s": round(time.time() - start, 1),
                              "kernels": {n: kp.metrics.get("gpu__time_duration.sum") for n, kp in p.kernels.items()}})
        except Exception as e:
            prof_rows.append({"name": name, "error": f"{type(e).__name__}: {e}"[:400]})
        print("ncu", json.dumps(prof_rows[-1]), flush=True)
    report["ncu"] = prof_rows
    report["total_s"] = round(time.time() - t0, 1)
    (out_dir / "gpu_containment_check.json").write_text(json.dumps(report, indent=2))
    agree = sum(r["verdict"] == r["expected"] for r in rows)
    print(f"\nverdicts as expected: {agree}/{len(rows)}; secret in any message: {any(r['secret_in_message'] for r in rows)}; "
          f"total {report['total_s']} s")
    for r in rows:
        if r["verdict"] != r["expected"]:
            print(f"  MISMATCH {r['name']}: {r['verdict']} ({r['message'][:200]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
