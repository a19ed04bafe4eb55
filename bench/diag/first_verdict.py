"""Diagnosis (issue 36): where `agent run`'s first verdict waits, in the parent, piece by piece.

    python bench/diag/first_verdict.py [--device cuda|cpu]

In one fresh process, one after another as `agent run` meets them: the agent's imports, the target GPU's detection
(torch imported, CUDA's driver asked), the static checks of the starting kernel (the first imports torch's and
Triton's modules for agent.harness.static.reach), the cache's fingerprint (nvidia-smi, the harness's code hash),
the saturation probe (cached), past_tile; beside them, from the start, the warm workers' template (its own process:
when it was ready). Prints seconds per piece and writes $OUT/first_verdict.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
OUT = Path(os.environ.get("OUT", "."))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--cache", default=None, help="the truths' cache (the same twice: a warm run's first verdict)")
    p.add_argument("--profile-run", action="store_true", help="start an ncu profile run for the candidate as the "
                   "loop does (agent.profilewarm) beside its evaluation")
    a = p.parse_args()
    device = a.device
    import logging

    logging.basicConfig(format="%(relativeCreated)8.0f ms %(name)s: %(message)s")
    logging.getLogger("agent.harness.wall.template").setLevel(logging.DEBUG)
    t0 = time.monotonic()
    rows: dict[str, float] = {}

    def took(name: str, since: float) -> float:
        now = time.monotonic()
        rows[name] = round(now - since, 3)
        print(f"{name:34s} {rows[name]:7.3f} s   (at {now - t0:6.2f} s)", flush=True)
        return now

    import agent.cli  # noqa: F401
    import agent.wiring  # noqa: F401

    t = took("agent's imports", t0)
    ready: dict[str, float] = {}

    def template() -> None:
        from agent.harness import runner

        runner.prestart(device)
        ready["template"] = round(time.monotonic() - t0, 3)

    thread = threading.Thread(target=template, daemon=True)
    thread.start()
    if device == "cuda":
        from agent.catalog import detect_device_name

        detect_device_name()
        t = took("detect the GPU (torch, CUDA)", t)
    from agent.harness.pipeline import EvalRequest, _static
    from agent.harness.runner import sizes_for
    from agent.harness.settings import settings
    from agent.harness.shared import Shared
    from agent.problems import load_problem, starting_code
    from agent.stages import get_stage

    problem = load_problem("gap44")
    req = EvalRequest(source=starting_code(problem) or "", problem=problem, stage=get_stage("memory-fusion"),
                      device=device)
    t = took("pipeline's imports", t)
    static = _static(req, device)
    t = took("static checks (first)", t)
    _static(req, device)
    t = took("static checks (again)", t)
    shared = Shared()
    shared._fingerprint(device)
    t = took("fingerprint (nvidia-smi, code)", t)
    from agent.harness.judge.tiles import Widths, past_tile

    assert not hasattr(static, "verdict"), static
    past_tile(problem, device, static[0], Widths(), 1, 7)
    t = took("past_tile", t)
    thread.join(300)
    rows["template ready at"] = ready.get("template", -1.0)
    print(f"template ready {ready.get('template', -1):.2f} s after the start", flush=True)
    # the starting kernel judged as a run's first candidate: which template its worker forks from
    from agent.harness.pipeline import evaluate_many
    from agent.harness.wall.template import templates

    keys = list(templates._live)
    warm = None
    if a.profile_run:
        from agent.profiler import ProfileRequest
        from agent.profilewarm import WarmRuns

        warm = WarmRuns()
        warm.start(ProfileRequest(code=static[0], problem=problem, stage=req.stage, out=OUT / "fv.ncu-rep"))
    t = time.monotonic()
    [result] = evaluate_many([req.model_copy(update={"cache_dir": Path(a.cache) if a.cache else None})], shared)
    t = took("the first candidate, judged", t)
    new = [k for k in templates._live if k not in keys]
    rows["templates started for it"] = len(new)
    print(f"verdict {result.verdict}; phases {result.phases}; templates started for it: {len(new)}", flush=True)
    for k in new:  # what differs from the template started early
        old = dict(keys[0][1]) if keys else {}
        diff = {n: (old.get(n), v) for n, v in dict(k[1]).items() if old.get(n) != v}
        diff.update({n: (v, None) for n, v in old.items() if n not in dict(k[1])})
        print(f"  its environment differs from the early one's in: {diff}", flush=True)
        rows["environment differs"] = str(diff)
    if warm is not None:
        warm.close()
    (OUT / "first_verdict.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
