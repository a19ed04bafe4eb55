"""The parts of the benchmark (issue 10), each run by bench/suite/run_all.py in its own process with its own deadline:

    python3 bench/suite/bench_parts.py PART CTX.json RESULT.json

PART is one of limits, mf_run, baselines, accuracy, throughput, e2e_run; and two helper modes the parts start
themselves: accuracy-timing SPEC.json OUT.json (the harness's timing function on eager, compile and the
candidates, repeated) and ncu-target SPEC.json (one forward of each item inside the NVTX range, for ncu).

A part writes its RESULT.json after each step (a part killed at its deadline still leaves what it measured) and
returns within ctx["timeout_s"] - GRACE_S. GPU work happens in subprocesses (the agent, sandboxed workers, ncu
and the two helper modes), so a part process itself never holds a CUDA context, except `limits`.
Nothing heavy is imported at module level: tests import this file on the CPU.
"""


from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from parts.accuracy import mode_accuracy_timing, mode_ncu_target, part_accuracy  # noqa: E402
from parts.baselines import part_baselines  # noqa: E402
from parts.common import GRACE_S  # noqa: E402
from parts.limits import part_limits  # noqa: E402
from parts.runs import part_e2e_run, part_mf_run  # noqa: E402
from parts.throughput import part_throughput  # noqa: E402

# ---------------------------------------------------------------- entry point

PARTS: dict[str, Callable[[dict, float, Callable[[dict], None]], dict]] = {
    "limits": part_limits, "mf_run": part_mf_run, "baselines": part_baselines, "accuracy": part_accuracy,
    "throughput": part_throughput, "e2e_run": part_e2e_run,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) >= 2 and args[0] == "accuracy-timing":
        return mode_accuracy_timing(Path(args[1]), Path(args[2]))
    if len(args) >= 2 and args[0] == "ncu-target":
        return mode_ncu_target(Path(args[1]))
    if len(args) != 3 or args[0] not in PARTS:
        print(f"usage: bench_parts.py {{{','.join(PARTS)}}} CTX.json RESULT.json", file=sys.stderr)
        return 2
    name, ctx_path, result_path = args[0], Path(args[1]), Path(args[2])
    ctx = json.loads(ctx_path.read_text())
    deadline = time.monotonic() + ctx["timeout_s"] - GRACE_S
    if ctx["device"] == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    latest: dict[str, Any] = {}

    def save(data: dict) -> None:
        latest.clear()
        latest.update(data)
        _write(result_path, {"data": data})

    try:
        _write(result_path, {"data": PARTS[name](ctx, deadline, save)})
        return 0
    except BaseException:  # noqa: BLE001 - the driver reports it and goes on
        tb = traceback.format_exc()
        print(tb, file=sys.stderr, flush=True)
        _write(result_path, {"data": latest, "error": tb[-3000:]})
        return 1


def _write(path: Path, payload: dict) -> None:
    """Atomically: the driver may read the file while a part still runs."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1, default=str))
    os.replace(tmp, path)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip CUDA teardown (limits holds a context)
