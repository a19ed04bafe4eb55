"""Part 1: the limits (copy and read bandwidth, the read-once floor) and the versions."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from parts.common import BENCH

# ---------------------------------------------------------------- part 1: limits (and the versions)


def env_info(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {"python": sys.version.split()[0], "device": device}
    try:
        import torch

        info["torch"], info["cuda"] = torch.__version__, torch.version.cuda
        if device == "cuda":
            info["gpu"] = torch.cuda.get_device_name()
    except Exception as e:  # noqa: BLE001
        info["torch"] = f"unavailable: {e}"
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception as e:  # noqa: BLE001
        info["triton"] = f"unavailable: {e}"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            info["driver"] = out.stdout.strip().splitlines()[0].split(",")[0].strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    from agent.profiler import find_ncu

    ncu = find_ncu()
    if ncu:
        try:
            v = subprocess.run([str(ncu), "--version"], capture_output=True, text=True, timeout=30).stdout
            info["ncu"] = (v.strip().splitlines() or ["ncu"])[-1]
        except (OSError, subprocess.TimeoutExpired):
            info["ncu"] = str(ncu)
    else:
        info["ncu"] = "ncu not found"
    try:
        from agent.harness.wall.sandbox import isolation

        info["isolation"] = isolation()
    except Exception:  # noqa: BLE001
        pass
    return info


def part_limits(ctx: dict, deadline: float, save: Callable[[dict], None]) -> dict:
    data: dict[str, Any] = {"env": env_info(ctx["device"])}
    save(data)
    if ctx["device"] == "cuda":
        spec = importlib.util.spec_from_file_location("bench_limits", BENCH / "limits.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        tmp = Path(tempfile.mkdtemp(prefix="bench-limits-"))
        old = os.environ.get("OUT")
        os.environ["OUT"] = str(tmp)
        try:
            mod.main()
        finally:
            if old is None:
                os.environ.pop("OUT", None)
            else:
                os.environ["OUT"] = old
        data.update(json.loads((tmp / "limits.json").read_text()))
        shutil.rmtree(tmp, ignore_errors=True)
        from agent.catalog import closest_gpu

        data["spec_peak_gbs"] = float(closest_gpu(data["gpu"]).memory_bandwidth_gbs)
    else:  # CPU smoke: the same keys from a small CPU copy, to exercise the plumbing
        import torch

        src = torch.rand(1 << 22)
        dst = torch.empty_like(src)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            dst.copy_(src)
            times.append(time.perf_counter() - t0)
        s = statistics.median(times)
        n = src.numel() * 4
        data.update(gpu="cpu (smoke)", copy_gbs=2 * n / s / 1e9, copy_spread_pct=0.0, sum_read_gbs=None,
                    conv_out_bytes=16 * 128 * 256 * 256 * 4, conv_in_bytes=16 * 64 * 128 * 128 * 4, spec_peak_gbs=None)
        data["read_conv_out_once_us_at_copy_bw"] = data["conv_out_bytes"] / (data["copy_gbs"] * 1e9) * 1e6
        data["read_input_once_us_at_copy_bw"] = data["conv_in_bytes"] / (data["copy_gbs"] * 1e9) * 1e6
    if data.get("spec_peak_gbs") and data.get("copy_gbs"):
        data["copy_pct_of_spec"] = 100 * data["copy_gbs"] / data["spec_peak_gbs"]
    return data


