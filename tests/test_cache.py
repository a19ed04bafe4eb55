"""Truths and baselines kept across processes (agent.harness.cache, agent.harness.shared): hit, miss, invalidation,
the bound, and the salt that keeps cached inputs unguessable."""

from __future__ import annotations

import os
import shutil
import stat
import time

import pytest

from agent.harness.cache import DiskCache, entry_name, fingerprint, salted
from agent.harness.job import plan_timing, plan_trials
from agent.harness.runner import sizes_for
from agent.harness.settings import settings
from agent.harness.shared import Shared
from agent.problems import load_problem

# ---------------------------------------------------------------- the directory


def test_entries_are_written_whole_and_read_back(tmp_path):
    cache = DiskCache(tmp_path / "c", max_mb=1)
    assert cache.get("a", ".json") is None
    cache.put("a", ".json", lambda p: p.write_text("{}"))
    assert cache.get("a", ".json").read_text() == "{}"
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["a.json"]  # no temporary file left behind


def test_a_writer_that_fails_leaves_no_entry(tmp_path):
    cache = DiskCache(tmp_path, max_mb=1)

    def broken(p):
        p.write_text("half")
        raise OSError("disk full")

    cache.put("a", ".json", broken)
    assert cache.get("a", ".json") is None and list(tmp_path.iterdir()) == []


def test_past_its_bound_the_least_recently_used_entries_go(tmp_path):
    cache = DiskCache(tmp_path, max_mb=0.25)  # 262144 bytes: room for two of these
    for name in ("old", "used", "new"):
        cache.put(name, ".bin", lambda p: p.write_bytes(b"x" * 100_000))
        time.sleep(0.01)
        if name == "used":
            os.utime(tmp_path / "old.bin", (1, 1))  # long unused
            cache.get("used", ".bin")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.bin", "used.bin"]


def test_a_cache_that_cannot_be_written_only_costs_the_reuse(tmp_path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")  # even root cannot make a directory here
    cache = DiskCache(blocked, max_mb=1)
    cache.put("a", ".json", lambda p: p.write_text("{}"))  # no exception
    assert cache.get("a", ".json") is None


def test_entry_names_change_with_any_part():
    assert entry_name("p", b"x", 1) == entry_name("p", b"x", 1)
    assert len({entry_name("p", b"x", 1), entry_name("p", b"y", 1), entry_name("p", b"x", 2)}) == 3


def test_the_fingerprint_names_versions_gpu_settings_and_code():
    fp = fingerprint("cuda", "NVIDIA H100 80GB HBM3")
    for part in ("torch", "triton", "cuda", "python", "code", "settings", "H100"):
        assert part in fp
    assert fingerprint("cpu", "whatever") == fingerprint("cpu", "other")  # CPU mode: no GPU in the key


def test_the_fingerprint_follows_what_changes_a_result_and_nothing_else(monkeypatch):
    before = fingerprint("cuda", "H100")
    monkeypatch.setattr(settings().sandbox, "gpu_slots", settings().sandbox.gpu_slots + 1)  # how many run at once
    monkeypatch.setattr(settings().cache, "max_mb", settings().cache.max_mb * 2)
    assert fingerprint("cuda", "H100") == before
    monkeypatch.setattr(settings().timing, "latency_window_ms", settings().timing.latency_window_ms * 2)
    assert fingerprint("cuda", "H100") != before


# ---------------------------------------------------------------- the salt


def test_seeds_are_salted_with_a_secret_kept_in_the_cache(tmp_path):
    a = salted(0, tmp_path / "one")
    assert salted(0, tmp_path / "one") == a  # stable on this machine: the cache can hit
    assert salted(1, tmp_path / "one") != a
    assert salted(0, tmp_path / "two") != a  # another machine (another secret): other inputs
    secret = tmp_path / "one" / "secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and len(secret.read_bytes()) == 32
    assert 0 <= a < 2**31


def test_without_a_cache_each_process_salts_with_a_secret_of_its_own():
    """Inputs and timing pools drawn in one run cannot be predicted from another: two processes (two `agent eval`s
    with no cache) salt the same seed differently, while one process stays consistent with itself."""
    import subprocess
    import sys

    code = ("from agent.harness.cache import salted; from agent.harness.job import plan_timing\n"
            "s = salted(0, None); i = salted(0, None, 'inputs'); p = plan_timing('cuda', s)\n"
            "assert salted(0, None) == s\nprint(s, i, p.pool_seeds[:3], p.fresh_seed)")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    first, second = (r.stdout.split(" ", 2) for r in runs)
    assert first[0] != second[0] and first[1] != second[1] and first[2] != second[2]


def test_seeds_for_different_purposes_are_independent(tmp_path):
    """The weights' seed is the candidate's to read (ModelNew's __init__ runs under it): the inputs' may not follow."""
    weights, inputs = salted(0, tmp_path), salted(0, tmp_path, "inputs")
    assert inputs != weights and salted(0, tmp_path, "inputs") == inputs and 0 <= inputs < 2**31


def test_without_a_cache_the_salt_is_the_processes_own():
    assert salted(5, None) == salted(5, None)


# ---------------------------------------------------------------- truths across processes


def reference(shared: Shared, problem, cache_dir):
    seed = salted(0, cache_dir)
    sizes = sizes_for(problem, "cpu")
    trials = plan_trials(sizes, seed, settings().validation.distributions)
    return shared.reference(problem, "cpu", seed, trials, plan_timing("cpu", seed), [], time_eager=True,
                            cache_dir=cache_dir)


@pytest.mark.slow
def test_a_second_process_reuses_the_truths_and_a_changed_problem_does_not(tmp_path):
    src = load_problem("gap44")
    copy = tmp_path / "gap44.py"
    shutil.copyfile(src.path, copy)
    problem = src.model_copy(update={"path": copy})
    cache = tmp_path / "cache"

    first = Shared()
    ref = reference(first, problem, cache)
    assert first.hits["reference"] == 0 and len(list((cache / "references").iterdir())) == 1

    second = Shared()  # a new process: nothing in memory
    t0 = time.monotonic()
    again = reference(second, problem, cache)
    assert second.hits["reference"] == 1 and time.monotonic() - t0 < 2.0
    assert [t.model_dump() for t in again.trials] == [t.model_dump() for t in ref.trials]
    assert all(a.equal(b) for x, y in zip(ref.truths, again.truths) for a, b in zip(x, y))
    assert len(again.pool) == len(ref.pool) and again.eager_ms == ref.eager_ms

    copy.write_text(copy.read_text() + "\n# an edit\n")  # any change to the problem file is a new key
    third = Shared()
    reference(third, problem, cache)
    assert third.hits["reference"] == 0 and len(list((cache / "references").iterdir())) == 2


def test_the_candidate_is_not_shown_the_cache():
    from agent.harness.pipeline import EvalRequest, _Job
    from agent.stages import get_stage

    req = EvalRequest(source="", problem=load_problem("gap44"), stage=get_stage("memory-fusion"), device="cpu",
                      cache_dir="/somewhere/cache", hide=["/store"])
    job = _Job(req=req, device="cpu", code="", kernels=[], seed=1, trials=[], plan=None)
    assert [str(p) for p in job.hide()] == ["/store", "/somewhere/cache"]


def test_every_validation_call_is_traced():
    """A candidate counts its calls: one traced call per size would tell it when to do the work honestly."""
    from agent.problems import load_problem

    trials = plan_trials(load_problem("gap44").cpu_sizes, 1, settings().validation.distributions)
    assert len(trials) > len({t.size for t in trials}) and all(t.trace for t in trials)


def test_a_truth_being_computed_holds_up_neither_the_baseline_nor_another_caller_of_the_same_truth(monkeypatch):
    # A GPU round starts its candidates on the (cached) baseline while its truth is still being computed beside them;
    # a second caller of the truth waits for the first computation instead of starting its own.
    import threading

    import agent.harness.shared as shared_mod

    computing, release, computed = threading.Event(), threading.Event(), []

    def slow_reference(*args, **kwargs):
        computed.append(1)
        computing.set()
        assert release.wait(10)
        return "truth"

    monkeypatch.setattr(shared_mod, "_compute_reference", slow_reference)
    monkeypatch.setattr(shared_mod, "_compute_baseline", lambda *a, **k: "baseline")
    monkeypatch.setattr(shared_mod, "gpu_name", lambda: "H200")
    problem, shared = load_problem("gap44"), Shared()
    trials = plan_trials(sizes_for(problem, "cuda"), 1, settings().validation.distributions)
    got: list[object] = []

    def truth() -> None:
        got.append(shared.reference(problem, "cuda", 1, trials, None, []))

    first, second = threading.Thread(target=truth), threading.Thread(target=truth)
    first.start()
    assert computing.wait(10)
    second.start()
    t0 = time.monotonic()
    assert shared.baseline(problem, "cuda", None, []) == "baseline"  # not behind the truth
    assert time.monotonic() - t0 < 1.0 and got == []
    release.set()
    first.join(10)
    second.join(10)
    assert got == ["truth", "truth"] and computed == [1]


def test_an_evaluators_widths_are_one_per_cache_and_kept_under_it(tmp_path):
    # past_tile's meta-device measurements: one Widths for the process (every round), its entries beside the truths
    shared, cache = Shared(), tmp_path / "cache"
    widths = shared.widths(cache)
    assert shared.widths(cache) is widths and shared.widths(None) is not widths
    problem = load_problem("gap44", "cpu")
    widths.widest(problem.path, problem.cpu_sizes[0].overrides)
    assert [p.suffix for p in (cache / "widths").iterdir()] == [".json"]
