"""agent.profileahead: a profile asked for ahead of need runs beside the loop's other work, and each code is profiled
once whichever candidate asks."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from agent.profileahead import ProfilesAhead
from agent.schema import KernelProfile, Profile, Stage
from agent.stages import get_stage

SLOW = 0.4


class SlowProfiler:
    """Profiler: takes SLOW seconds, writes a report where the run keeps it, records who asked and on which thread."""

    def __init__(self, out, fail: set[str] = frozenset(), enabled: bool = True) -> None:
        self.out, self.fail, self.enabled = out, fail, enabled
        self.calls: list[tuple[str, str]] = []

    def profile(self, code: str, stage: Stage, candidate_id: str) -> Profile | None:
        self.calls.append((candidate_id, threading.current_thread().name))
        time.sleep(SLOW)
        if code in self.fail:
            return None
        self.out(candidate_id).parent.mkdir(parents=True, exist_ok=True)
        self.out(candidate_id).write_bytes(f"report of {code}".encode())
        return Profile(gpu="H200", kernels={"k": KernelProfile(name="k", metrics={"dram__throughput": 90.0})})


@pytest.fixture
def out(tmp_path: Path):
    return lambda cid: tmp_path / "profiles" / f"{cid}.ncu-rep"


def test_a_profile_asked_ahead_runs_in_the_background_and_is_waited_for_only_for_what_is_left(out):
    inner = SlowProfiler(out)
    profiles = ProfilesAhead(inner, out)
    stage = get_stage("memory-fusion")
    t0 = time.monotonic()
    profiles.ahead("code A", stage, "c1")
    assert time.monotonic() - t0 < SLOW / 4  # returns at once
    time.sleep(SLOW * 0.75)  # the round's other evaluations
    t1 = time.monotonic()
    prof = profiles.profile("code A", stage, "c1")
    waited = time.monotonic() - t1
    assert prof is not None and prof.kernels["k"].metrics["dram__throughput"] == 90.0
    assert waited < SLOW * 0.6  # only the rest of it
    assert inner.calls == [("c1", inner.calls[0][1])] and inner.calls[0][1].startswith("profile-ahead")
    profiles.close()


def test_the_same_code_is_profiled_once_and_its_report_copied_to_the_second_candidate(out):
    inner = SlowProfiler(out)
    profiles = ProfilesAhead(inner, out)
    stage = get_stage("memory-fusion")
    profiles.ahead("code A", stage, "c1")
    profiles.ahead("code A", stage, "c2")  # the same code again: nothing new starts
    first, second = profiles.profile("code A", stage, "c1"), profiles.profile("code A", stage, "c2")
    assert first == second and [c for c, _ in inner.calls] == ["c1"] and profiles.started == 1
    assert out("c2").read_bytes() == b"report of code A"
    # another stage collects other metrics: profiled again; other code too
    profiles.profile("code A", get_stage("algebraic"), "c3")
    profiles.profile("code B", stage, "c4")
    assert [c for c, _ in inner.calls] == ["c1", "c3", "c4"]
    profiles.close()


def test_a_profile_asked_now_runs_on_the_callers_thread_and_a_failed_one_is_not_tried_again(out):
    inner = SlowProfiler(out, fail={"broken"})
    profiles = ProfilesAhead(inner, out)
    stage = get_stage("memory-fusion")
    assert profiles.profile("broken", stage, "c1") is None
    assert profiles.profile("broken", stage, "c2") is None and not out("c2").exists()
    assert inner.calls == [("c1", threading.current_thread().name)]
    profiles.close()


def test_two_callers_of_one_code_share_one_run(out):
    inner = SlowProfiler(out)
    profiles = ProfilesAhead(inner, out)
    stage = get_stage("memory-fusion")
    got: list[Profile | None] = []
    threads = [threading.Thread(target=lambda c=c: got.append(profiles.profile("code A", stage, c))) for c in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(inner.calls) == 1 and len(got) == 2 and got[0] == got[1]
    profiles.close()


def test_where_nothing_can_be_profiled_ahead_does_nothing(out):
    inner = SlowProfiler(out, enabled=False)
    profiles = ProfilesAhead(inner, out)
    profiles.ahead("code A", get_stage("memory-fusion"), "c1")
    time.sleep(0.05)
    assert inner.calls == [] and not profiles.enabled
    profiles.close()


def test_close_drops_the_profiles_not_yet_started(out):
    inner = SlowProfiler(out)
    profiles = ProfilesAhead(inner, out)
    stage = get_stage("memory-fusion")
    for k in range(6):
        profiles.ahead(f"code {k}", stage, f"c{k}")
    time.sleep(SLOW / 4)
    profiles.close()  # the first four are running: they finish; the two queued behind them never start
    assert sorted(c for c, _ in inner.calls) == ["c0", "c1", "c2", "c3"]


def test_profiles_asked_ahead_run_together_so_the_last_asked_does_not_wait_behind_the_others(out):
    """A round asks ahead for each candidate that beats the best as it lands; the one the next prompt needs (the new
    best) is often the last. One at a time it waited for every earlier profile (~29 s on an H200); now up to four
    run at once (their replays serialize on the GPU's lock, not here)."""
    inner = SlowProfiler(out)
    profiles = ProfilesAhead(inner, out)
    stage = get_stage("memory-fusion")
    for i in range(4):
        profiles.ahead(f"code {i}", stage, f"c{i}")
    t0 = time.monotonic()
    assert profiles.profile("code 3", stage, "c3") is not None
    assert time.monotonic() - t0 < SLOW * 1.6  # its own time, not four profiles'
    assert len({thread for _, thread in inner.calls}) == 4
    profiles.close()
    one = ProfilesAhead(SlowProfiler(out), out, at_once=1)
    for i in range(3):
        one.ahead(f"code {i}", stage, f"d{i}")
    t0 = time.monotonic()
    one.profile("code 2", stage, "d2")
    assert time.monotonic() - t0 > SLOW * 2.5  # the queue it replaces
    one.close()


def test_a_rounds_answers_are_handed_to_the_inner_profiler_to_prepare_each_code_once(out):
    """agent.profilewarm's runs start as the round's evaluations do: the code extracted from each answer, once per
    distinct code and stage, in the background."""
    prepared: list[tuple[str, str]] = []
    done = threading.Event()

    class Preparing(SlowProfiler):
        def prepare(self, code: str, stage: Stage) -> None:
            prepared.append((code.strip(), stage.name))
            if len(prepared) == 2:
                done.set()

    profiles = ProfilesAhead(Preparing(out), out)
    stage = get_stage("memory-fusion")
    a = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass"
    b = a.replace("pass", "x = 2")
    answers = [f"```python\n{a}\n```", a + "\n", f"text, then\n```python\n{b}\n```", "no code at all"]
    profiles.prepare(answers, [stage] * 4)
    assert done.wait(5)
    time.sleep(0.1)
    assert prepared == [(a, "memory-fusion"), (b, "memory-fusion")]
    profiles.close()
    off = ProfilesAhead(Preparing(out, enabled=False), out)
    prepared.clear()
    off.prepare(answers, [stage] * 4)
    time.sleep(0.2)
    assert prepared == []  # no GPU to profile on: nothing starts
    off.close()
