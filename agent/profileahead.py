"""Profiles asked for before they are needed, and each code profiled once.

A round judges its candidates one after another behind the GPU's lock (timing is exclusive), then profiles the new
best and the beam's unprofiled parents, one ncu run after another (~10.5 s each on an H200, of which only the
replays hold the GPU alone: ncu's start, Python's imports and the candidate's build overlap anything). Here the loop
names a candidate as soon as its verdict says it will be needed (`ahead`): its profile runs in the background while
the round's other candidates are judged, and the loop's later `profile` call finds it done or waits for the rest.
Several run at once: each shares the GPU's lock until its replays (agent.harness.worker.candidate.profile).

Once per code: a candidate whose code (and stage) was profiled already gets that profile, its report copied to its
own path; a failed profile is not tried again in this process (the loop's rule for parents too).
"""

from __future__ import annotations

import hashlib
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from agent.protocols import Profiler
from agent.schema import Profile, Stage


class ProfilesAhead:
    """agent.protocols.Profiler around another: `ahead` starts a profile in the background, `profile` returns it,
    or runs it now; the same code and stage is profiled once, whichever candidate asks. `out(candidate_id)`: where a
    candidate's report lives (copied for a repeat). Up to `at_once` run together: only their replays hold the GPU
    alone (the profile worker shares its lock until then), so a profile asked ahead never queues behind another's
    start-up (one at a time, a round's new best waited ~29 s behind two earlier candidates' profiles on an H200; three
    at once, a beam's parent landing fourth waited ~10 s for a place): four, a default round's samples."""

    def __init__(self, inner: Profiler, out: Callable[[str], Path] | None = None, at_once: int = 4) -> None:
        self.inner, self.out = inner, out
        self._pool = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="profile-ahead")
        self._lock = threading.Lock()
        self._done: dict[str, Future[Profile | None]] = {}
        self._owner: dict[str, str] = {}  # key -> the candidate whose report it wrote
        self.started = 0  # profiles run by the inner profiler (for tests and BENCHMARKS)

    @property
    def enabled(self) -> bool:
        return self.inner.enabled

    def ahead(self, code: str, stage: Stage, candidate_id: str) -> None:
        """Start profiling `candidate_id` in the background, unless its code was profiled or is being profiled."""
        if not self.enabled:
            return
        key = _key(code, stage)
        with self._lock:
            if key in self._done:
                return
            self._owner[key] = candidate_id
            self._done[key] = self._pool.submit(self._run, code, stage, candidate_id)

    def prepare(self, answers: list[str], stages: list[Stage]) -> None:
        """Let the inner profiler start what profiling these answers' code would need (agent.profilewarm), each
        distinct code once, in the background: the round's evaluations start meanwhile."""
        prepare = getattr(self.inner, "prepare", None)
        if not self.enabled or not callable(prepare):
            return

        def start() -> None:
            from agent.harness.static.extract import extract_code
            from agent.harness.static.parsing import PARSING

            seen = set()
            for text, stage in zip(answers, stages):
                with PARSING:  # beside the round's static checks (CPython 3.11's shared AST depth)
                    code = extract_code(text)
                if code is not None and (code, stage.name) not in seen:
                    seen.add((code, stage.name))
                    prepare(code, stage)

        threading.Thread(target=start, name="profile-prepare", daemon=True).start()

    def profile(self, code: str, stage: Stage, candidate_id: str) -> Profile | None:
        """The profile of `code` at `stage`: the one already run or running, else run now (on this thread)."""
        if not self.enabled:
            return self.inner.profile(code, stage, candidate_id)
        key = _key(code, stage)
        with self._lock:
            fut = self._done.get(key)
            mine = fut is None
            if mine:
                fut = Future()
                fut.set_running_or_notify_cancel()
                self._done[key], self._owner[key] = fut, candidate_id
        assert fut is not None
        if mine:
            try:
                fut.set_result(self._run(code, stage, candidate_id))
            except BaseException as e:  # the waiting callers see it too
                fut.set_exception(e)
                raise
        prof = fut.result()
        owner = self._owner.get(key, candidate_id)
        if prof is not None and owner != candidate_id:
            self._copy_report(owner, candidate_id)
        return prof

    def close(self) -> None:
        """Drop the profiles not yet started; wait for those running (their ncu is a child of this process); end
        the inner profiler's runs started early."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def _run(self, code: str, stage: Stage, candidate_id: str) -> Profile | None:
        self.started += 1
        return self.inner.profile(code, stage, candidate_id)

    def _copy_report(self, owner: str, candidate_id: str) -> None:
        """The owner's report and parsed profile, as the repeat's own (a missing one is not an error: no report)."""
        if self.out is None:
            return
        src, dst = self.out(owner), self.out(candidate_id)
        for a, b in ((src, dst), (src.with_suffix(".json"), dst.with_suffix(".json"))):
            if a.exists() and not b.exists():
                b.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(a, b)


def _key(code: str, stage: Stage) -> str:
    """A code's identity for profiling: its text and the stage whose metrics the profile collects."""
    return hashlib.sha256(f"{stage.name}\0{code}".encode()).hexdigest()
