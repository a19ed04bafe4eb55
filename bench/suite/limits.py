"""Hardware limits for gap44: device-to-device copy bandwidth and the read-once times they imply.

Prints a table and writes limits.json under $OUT (or the current directory). Needs a CUDA GPU.
Usage: python bench/suite/limits.py
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import torch


def _median_ms(fn, reps: int = 50, warmup: int = 5) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    med = statistics.median(times)
    return med, 100 * (times[int(0.8 * len(times))] - times[int(0.2 * len(times))]) / med


def main() -> None:
    assert torch.cuda.is_available(), "needs a CUDA GPU"
    n = 1 << 30  # 1 GiB of fp32 per buffer: far beyond L2
    src = torch.rand(n // 4, device="cuda")
    dst = torch.empty_like(src)
    copy_ms, copy_spread = _median_ms(lambda: dst.copy_(src))
    copy_gbs = 2 * n / (copy_ms * 1e-3) / 1e9  # bytes read + bytes written
    # Read-only bandwidth: a sum reads every byte and writes one scalar.
    sum_ms, sum_spread = _median_ms(lambda: torch.sum(src))
    read_gbs = n / (sum_ms * 1e-3) / 1e9

    conv_out = 16 * 128 * 256 * 256 * 4  # gap44's ConvTranspose2d output, fp32
    conv_in = 16 * 64 * 128 * 128 * 4
    rows = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "copy_gbs": copy_gbs,
        "copy_spread_pct": copy_spread,
        "sum_read_gbs": read_gbs,
        "sum_spread_pct": sum_spread,
        "conv_out_bytes": conv_out,
        "conv_in_bytes": conv_in,
        "read_conv_out_once_us_at_copy_bw": conv_out / (copy_gbs * 1e9) * 1e6,
        "read_conv_out_once_us_at_read_bw": conv_out / (read_gbs * 1e9) * 1e6,
        "read_input_once_us_at_copy_bw": conv_in / (copy_gbs * 1e9) * 1e6,
    }
    out = Path(os.environ.get("OUT", "."))
    (out / "limits.json").write_text(json.dumps(rows, indent=2))
    for k, v in rows.items():
        print(f"{k:40s} {v:.1f}" if isinstance(v, float) else f"{k:40s} {v}")


if __name__ == "__main__":
    main()
