"""agent.profilewarm: ncu's runs started before their code is known serve any code with the same kernel names, cost
only what follows the code (here: a fake ncu whose worker "imports" for IMPORT seconds, then waits for its job), and
never outlive their use."""

from __future__ import annotations

import os
import time
from pathlib import Path

from test_profiler import STAGE, fake_ncu, request  # noqa: F401  (fake_ncu: the fixture)

from agent.problems import load_problem, starting_code
from agent.profiler import NcuProfiler
from agent.profilewarm import WarmRuns

IMPORT = 1.5  # the fake's start and imports: long enough to tell from a loaded machine's sandbox overhead
SETTLE = IMPORT + 1.5  # a run started early has imported by then
SEED = starting_code(load_problem("gap44")) or ""
RENAMED = SEED.replace("fused_multiply_gap_kernel_small", "fused_multiply_gap_kernel_tiny")


def _fake(fake_ncu) -> Path:
    """ncu and its worker: IMPORT s of start and imports, then waiting for the job, then the recorded report."""
    return fake_ncu("""
        with open(job["result_path"], "w") as f:
            json.dump({"mode": "profile", "ok": True, "phase": "done"}, f)
        report(os.path.join(HERE, "seed_h100_metrics.ncu-rep"))
        """, before=f"time.sleep({IMPORT})")


def test_a_run_started_early_serves_code_with_the_same_kernel_names_and_costs_only_what_follows(tmp_path, fake_ncu):
    _fake(fake_ncu)
    cold_req = request(tmp_path / "cold")
    t0 = time.monotonic()
    from agent.profiler import profile

    profile(cold_req)
    cold = time.monotonic() - t0
    warm = WarmRuns()
    warm.start(request(tmp_path / "w"))
    time.sleep(SETTLE)  # the round's evaluations meanwhile
    variant = SEED + "\n# the next candidate: other code, the same kernels\n"
    run = warm.take(variant, STAGE.name)
    assert run is not None and warm.take(variant, STAGE.name) is None  # taken once
    t0 = time.monotonic()
    out = tmp_path / "w" / "next.ncu-rep"
    run.release(variant, out)
    prof = run.finish()
    after = time.monotonic() - t0
    assert prof.kernels and out.is_file() and out.with_suffix(".json").is_file()
    assert cold > IMPORT and cold - after > IMPORT / 2, (cold, after)  # most of the start was paid while waiting
    assert warm.take(RENAMED, STAGE.name) is None  # other kernel names: ncu's command line names them
    warm.close()


def test_at_most_four_wait_and_close_ends_them_all(tmp_path, fake_ncu):
    _fake(fake_ncu)
    warm = WarmRuns(most=4)
    codes = [SEED.replace("fused_multiply_gap_kernel_small", f"k{i}") for i in range(5)]
    for i, code in enumerate(codes):
        warm.start(request(tmp_path / str(i)).model_copy(update={"code": code}))
    warm.start(request(tmp_path / "again").model_copy(update={"code": codes[4]}))  # waits already: not twice
    assert warm.started == 5
    assert warm.take(codes[0], STAGE.name) is None  # the oldest was ended for the fifth
    runs = [warm.take(code, STAGE.name) for code in codes[1:3]]
    assert all(r is not None and r.alive() for r in runs)
    for r in runs:
        r.cancel()
        assert not r.alive() and not r.workdir.exists()
    warm.close()
    assert warm.take(codes[3], STAGE.name) is None and warm.take(codes[4], STAGE.name) is None


def test_the_profiler_uses_a_waiting_run_and_starts_the_next_of_its_kind(tmp_path, fake_ncu):
    _fake(fake_ncu)
    problem = load_problem("gap44")
    profiler = NcuProfiler(problem, lambda cid: tmp_path / "profiles" / f"{cid}.ncu-rep", "cuda", timeout_s=60,
                           warm=WarmRuns())
    t0 = time.monotonic()
    assert profiler.profile(SEED, STAGE, "c0") is not None  # cold: nothing waited
    cold = time.monotonic() - t0
    assert profiler.warm is not None and profiler.warm.started == 1 and profiler.warm.taken == 0
    time.sleep(SETTLE)
    t0 = time.monotonic()
    assert profiler.profile(SEED + "\n", STAGE, "c1") is not None
    warm = time.monotonic() - t0
    assert cold - warm > IMPORT / 2 and profiler.warm.taken == 1 and profiler.warm.started == 2, (cold, warm)
    assert (tmp_path / "profiles" / "c1.ncu-rep").is_file()
    profiler.close()
    assert os.path.exists(tmp_path / "profiles" / "c1.json")


def test_where_ncu_cannot_count_no_run_is_started_ahead_again(tmp_path, fake_ncu):
    """Without permission to read the counters every profile fails alike: the runs waiting are ended and none
    starts again (each would import torch under ncu for nothing)."""
    fake_ncu('print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission"); sys.exit(1)')
    problem = load_problem("gap44")
    said: list[str] = []
    warm = WarmRuns()
    profiler = NcuProfiler(problem, lambda cid: tmp_path / f"{cid}.ncu-rep", "cuda", timeout_s=60,
                           on_error=said.append, warm=warm)
    profiler.prepare(SEED, STAGE)
    assert warm.started == 1
    assert profiler.profile(SEED, STAGE, "c0") is None and "permission" in said[0]
    assert profiler.warm is None and warm.take(SEED, STAGE.name) is None
    profiler.prepare(SEED, STAGE)
    assert warm.started == 1  # nothing more
