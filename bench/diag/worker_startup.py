"""Diagnosis (issue 15): where a candidate worker's ~6 s "imports" phase goes on the GPU.

Times, in a fresh process with an empty HOME (as the sandbox gives each candidate) and then again with the HOME of
the first run (a warm Triton cache): importing torch and triton, the harness modules, Trusted + the launch tracker
(Triton's driver), the problem's modules, the weights on the device (the CUDA context), the integrity snapshot, then
one small Triton kernel compiled and launched. `python bench/diag/worker_startup.py` prints and writes
$OUT/worker_startup.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def child(device: str) -> dict:
    t = [("start", time.perf_counter())]

    def m(name: str) -> None:
        t.append((name, time.perf_counter()))

    import torch
    m("import torch")
    import triton
    import triton.language as tl
    m("import triton")
    sys.path.insert(0, str(REPO))
    from agent.harness.worker import candidate  # noqa: F401
    from agent.harness.worker.trace import Tracker
    from agent.harness.worker.trusted import Integrity, Trusted
    m("harness modules")
    tr = Trusted(device)
    tk = Tracker(tr)
    tk.install()
    m("Trusted + tracker (Triton driver)")
    from agent.harness.worker.inputs import weights
    from agent.problems import load_module, load_problem

    p = load_problem("gap44")
    mods = [load_module(p.path, {}), load_module(p.path, {})]
    m("problem modules")
    [weights(x, 0, device) for x in mods]
    m("weights on the device (CUDA context)")
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    Integrity({"JITFunction": JITFunction, "Autotuner": Autotuner, **tk.hooked()})
    m("integrity snapshot")

    @triton.jit
    def add(x, y, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)

    a = torch.ones(1000, device=device)
    b = torch.empty_like(a)
    add[(4,)](a, b, 1000, BLOCK=256)
    torch.cuda.synchronize()
    m("first small kernel (compile + launcher + launch)")
    out, prev = {}, t[0][1]
    for name, v in t[1:]:
        out[name] = round(v - prev, 3)
        prev = v
    out["total"] = round(t[-1][1] - t[0][1], 3)
    return out


def main() -> int:
    if sys.argv[1:2] == ["child"]:
        print(json.dumps(child(sys.argv[2])))
        return 0
    home = Path(tempfile.mkdtemp(prefix="agent-startup-home-", dir="/opt" if os.access("/opt", os.W_OK) else None))
    env = {**os.environ, "HOME": str(home)}
    env.pop("TRITON_CACHE_DIR", None)
    report = {}
    for label in ("empty HOME", "warm HOME", "warm HOME again"):
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, __file__, "child", "cuda"], env=env, capture_output=True, text=True,
                           timeout=300)
        try:
            report[label] = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            report[label] = {"error": p.stderr[-1500:]}
        report[label]["process_s"] = round(time.monotonic() - t0, 2)
        print(label, json.dumps(report[label]), flush=True)
    cache = home / ".triton" / "cache"
    report["triton_cache"] = {"files": sum(1 for _ in cache.rglob("*") if _.is_file()) if cache.exists() else 0,
                              "kb": sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) // 1024
                              if cache.exists() else 0}
    print("triton cache:", report["triton_cache"])
    (Path(os.environ.get("OUT", ".")) / "worker_startup.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
