"""GPU check of one `agent eval`'s wall time (issue 15, item 4): the algebraic rewrite with a fresh cache directory,
then WARM more times reusing it, and a hang at full size under the scaled limit. Writes $OUT/gpu_eval_speed.json.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "suite"))
WARM = 3


def main() -> int:
    from clocks import ALGEBRAIC, HANG, agent_eval

    cache = Path(tempfile.mkdtemp(prefix="agent-speed-cache-", dir="/opt" if os.access("/opt", os.W_OK) else None))
    report: dict = {"cold": agent_eval(ALGEBRAIC, cache)}
    print("cold", report["cold"]["wall_s"], report["cold"].get("phases"), flush=True)
    report["warm"] = []
    for _ in range(WARM):
        report["warm"].append(agent_eval(ALGEBRAIC, cache))
        print("warm", report["warm"][-1]["wall_s"], report["warm"][-1].get("phases"), flush=True)
    report["hang"] = agent_eval(HANG, cache, "--stage", "memory-fusion", timeout=300)
    print("hang", report["hang"]["wall_s"], report["hang"].get("message"), flush=True)
    (Path(os.environ.get("OUT", ".")) / "gpu_eval_speed.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
