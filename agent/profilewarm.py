"""Profile runs started before their code is known, so that a profile costs its replays, not ncu's start.

A profile's ~12 s on an H200 go mostly before the candidate matters (bench/diag/profile_phases.py): ncu's and
Python's start 1.2-1.9 s, importing torch and Triton under ncu 5.7 s, the first call's compilation 2.1 s, the
replays 1.9 s, the report 1.3 s. The ncu-wrapped worker cannot fork from the warm template (ncu must launch it), but
it can start early: agent.profiler.ProfileRun launches it with its job unpublished, and the worker imports, then
waits. ncu's command line names the kernels to count, so a run started early serves any code with the same kernel
names at the same stage: after each profile the next of its kind is started (a run's candidates mostly keep their
kernels' names), and `prepare` starts one for code about to be evaluated.

Unused runs are ended when more than `most` wait, or at `close`. Each waits without a CUDA context (it imports
trusted code only), its sandbox and limits as any worker's.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from agent.profiler import ProfileError, ProfileRequest, ProfileRun, kernels_of

log = logging.getLogger(__name__)


class WarmRuns:
    """Started profile runs waiting for their code, one per (stage, kernel names), the most recent `most` kept."""

    def __init__(self, most: int = 4, cap_s: float = 900.0) -> None:
        self.most, self.cap_s = most, cap_s
        self._lock = threading.Lock()
        self._runs: OrderedDict[tuple[str, tuple[str, ...]], ProfileRun] = OrderedDict()
        self.started = self.taken = 0  # for tests and BENCHMARKS

    def start(self, req: ProfileRequest) -> None:
        """Start a run for code like `req.code` at `req.stage`, unless one waits already (never raises)."""
        try:
            key = (req.stage.name, tuple(kernels_of(req.code)))
        except Exception:
            return
        if not key[1]:
            return
        with self._lock:
            if key in self._runs:
                self._runs.move_to_end(key)
                return
        try:
            run = ProfileRun(req, cap_s=self.cap_s)
        except Exception as e:  # no ncu here, a full disk: the profile itself will say so when asked
            log.debug("no profile run started early: %s", e)
            return
        with self._lock:
            self.started += 1
            old = self._runs.pop(key, None)
            self._runs[key] = run
            surplus = [self._runs.popitem(last=False)[1] for _ in range(max(0, len(self._runs) - self.most))]
        for r in ([old] if old is not None else []) + surplus:
            _end(r)

    def take(self, code: str, stage_name: str) -> ProfileRun | None:
        """The waiting run for this code's kernel names at this stage, if one still waits."""
        try:
            key = (stage_name, tuple(kernels_of(code)))
        except Exception:  # code the profile itself will refuse, one line
            return None
        with self._lock:
            run = self._runs.pop(key, None)
        if run is not None and not run.alive():  # ended waiting (its limit, a killed sandbox): not usable
            _end(run)
            return None
        if run is not None:
            self.taken += 1
        return run

    def close(self) -> None:
        """End every run still waiting."""
        with self._lock:
            runs, self._runs = list(self._runs.values()), OrderedDict()
        for run in runs:
            run.cancel()


def _end(run: ProfileRun) -> None:
    """End a run nobody will release, in the background (its sandbox takes a moment to tear down)."""
    threading.Thread(target=run.cancel, name="profile-run-end", daemon=True).start()
