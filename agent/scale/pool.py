"""Worker pools: the work queue that feeds a round to workers, and the local worker processes (--gpus).

How the driver reaches one worker is a handle: LocalHandle (a process on this host, here) or RayHandle
(agent.scale.raypool). A handle whose worker is gone raises WorkerDied.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from agent.errors import UserError
from agent.scale.settings import slots_per_gpu as default_slots
from agent.scale.worker import _serve

log = logging.getLogger(__package__)  # "agent.scale", as before the split: log lines keep their name


class WorkerDied(Exception):
    """The worker process or actor is gone (or hung and was killed) while it held a candidate."""


# ---------------------------------------------------------------- handles: how the driver reaches one worker


class _Orphans:
    """The process groups a worker's sandboxed subprocesses lead (each candidate, reference, profile): they
    would outlive a killed worker (an infinite loop would spin on), so the driver notes them while the worker
    lives and kills them after. Only for a worker on this host."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.groups: set[int] = set()

    def track(self) -> None:
        if self.pid is None:
            return
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    with open(f"/proc/{entry.name}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()
                    if int(fields[1]) == self.pid:  # fields after the name: state ppid pgrp
                        self.groups.add(int(fields[2]))
                except (OSError, IndexError, ValueError):
                    continue

    def kill(self) -> None:
        own = {os.getpgid(0), self.pid}
        for g in self.groups - own:
            try:
                os.killpg(g, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.groups.clear()


class _Handle:
    """One worker, wherever it runs: what the pool asks of it."""

    label: str
    current: int | None = None  # the index of the item it is working on (tests watch it)

    def call(self, method: str, args: tuple, deadline_s: float) -> tuple[str, Any]:
        raise NotImplementedError

    def restart(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class LocalHandle(_Handle):
    """A worker process on this host (multiprocessing, spawn), pinned to `gpu`."""

    def __init__(self, label: str, device: str, gpu: str | None) -> None:
        import multiprocessing

        self.label, self.device, self.gpu = label, device, gpu
        self._ctx = multiprocessing.get_context("spawn")  # no fork of a driver that may hold CUDA or threads
        self._start()

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self.proc = self._ctx.Process(target=_serve, args=(child, self.device, self.gpu), daemon=True,
                                      name=f"agent-eval-{self.label}")
        self.proc.start()
        child.close()
        self.conn = parent
        self._orphans = _Orphans()
        self._orphans.pid = self.proc.pid

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def call(self, method: str, args: tuple, deadline_s: float) -> tuple[str, Any]:
        try:
            self.conn.send((method, args))
        except (OSError, ValueError) as e:
            raise WorkerDied(self._why(f"could not send it the candidate ({e})")) from None
        start = time.monotonic()
        while True:
            if self.conn.poll(0.25):
                try:
                    return self.conn.recv()
                except (EOFError, OSError):
                    raise WorkerDied(self._why()) from None
            self._orphans.track()
            if not self.proc.is_alive():
                raise WorkerDied(self._why())
            if time.monotonic() - start > deadline_s:
                self.kill()
                raise WorkerDied(f"no answer within {deadline_s:.0f} s; killed")

    def _why(self, what: str = "") -> str:
        self.proc.join(timeout=2)
        code = self.proc.exitcode
        if what:
            return what
        if code is not None and code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with status {code}" if code is not None else "stopped answering"

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self._orphans.kill()
        self.conn.close()

    def restart(self) -> None:
        self.kill()
        self._start()

    def close(self) -> None:
        try:
            self.conn.send(None)
            self.proc.join(timeout=5)
        except (OSError, ValueError):
            pass
        self.kill()


# ---------------------------------------------------------------- the pool


class WorkerPool:
    """Workers of one kind (local processes or Ray actors) and the round-robin-free work queue that feeds them."""

    def __init__(self, handles: list[_Handle], *, device: str, gpus: list[str], kind: Literal["local", "ray"]) -> None:
        if not handles:
            raise UserError("no evaluation worker could be started")
        self.handles, self.device, self.gpus, self.kind = handles, device, gpus, kind
        self._closed = False
        atexit.register(self.close)

    @property
    def workers(self) -> int:
        return len(self.handles)

    def describe(self) -> str:
        """'4 workers (local processes) on 2 GPUs (0, 1)' — what `agent run` prints."""
        what = "local processes" if self.kind == "local" else "Ray actors"
        if self.device != "cuda":
            return f"{self.workers} workers ({what}, CPU mode)"
        ids = f" ({', '.join(self.gpus)})" if self.gpus else ""
        return f"{self.workers} workers ({what}) on {len(self.gpus) or '?'} GPU{'s' if len(self.gpus) != 1 else ''}{ids}"

    def map(self, method: str, items: list[tuple], deadline_s: float,
            retry: Callable[[tuple[str, Any]], bool] | None = None,
            on_answer: Callable[[int, tuple[str, Any] | WorkerDied], None] | None = None,
            ) -> list[tuple[str, Any] | WorkerDied]:
        """Run method(*item) for every item on whichever worker is free; answers in the items' order.

        A dead worker's item answers WorkerDied and the worker is replaced. `retry(answer)`: True sends the
        item round once more (a candidate that only waited for the GPU). `on_answer(index, answer)`: called from
        the worker's thread as each answer is final."""
        done = on_answer or (lambda i, a: None)
        work: queue.Queue[tuple[int, tuple, int]] = queue.Queue()
        for i, item in enumerate(items):
            work.put((i, item, 0))
        answers: list[tuple[str, Any] | WorkerDied | None] = [None] * len(items)

        def drain(h: _Handle) -> None:
            while True:
                try:
                    i, item, tries = work.get_nowait()
                except queue.Empty:
                    return
                h.current = i
                try:
                    answer: tuple[str, Any] | WorkerDied = h.call(method, item, deadline_s)
                except Exception as e:  # WorkerDied, or the transport itself failed: either way the worker is lost
                    answer = e if isinstance(e, WorkerDied) else WorkerDied(f"{type(e).__name__}: {e}")
                    log.warning("evaluation worker %s died: %s; replacing it", h.label, e)
                    try:
                        h.restart()
                    except Exception as err:  # e.g. the cluster has no room: the other workers carry on
                        log.error("could not replace evaluation worker %s: %s", h.label, err)
                        answers[i] = answer
                        done(i, answer)
                        return
                finally:
                    h.current = None
                if retry is not None and tries == 0 and not isinstance(answer, WorkerDied) and retry(answer):
                    work.put((i, item, 1))
                    continue
                answers[i] = answer
                done(i, answer)

        threads = [threading.Thread(target=drain, args=(h,), name=f"agent-drain-{h.label}", daemon=True)
                   for h in self.handles]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [a if a is not None else WorkerDied("no evaluation worker was left to take it") for a in answers]

    def call(self, method: str, args: tuple, deadline_s: float) -> tuple[str, Any] | WorkerDied:
        """One call on the first worker (profiling: no round is in flight then, the loop is sequential)."""
        h = self.handles[0]
        try:
            return h.call(method, args, deadline_s)
        except WorkerDied as e:
            log.warning("evaluation worker %s died: %s; replacing it", h.label, e)
            h.restart()
            return e

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for h in self.handles:
            try:
                h.close()
            except Exception as e:
                log.debug("closing %s: %s", h.label, e)


# ---------------------------------------------------------------- building pools


def local_pool(gpus: list[str], device: str, slots_per_gpu: int | None = None) -> WorkerPool:
    """Worker processes on this host: `slots_per_gpu` per GPU (cuda), or one per entry of `gpus` (cpu)."""
    if device != "cuda":
        return WorkerPool([LocalHandle(g, "cpu", None) for g in gpus], device="cpu", gpus=[], kind="local")
    slots = slots_per_gpu or default_slots()
    handles: list[_Handle] = [LocalHandle(f"gpu{g}" + (f".{s}" if slots > 1 else ""), "cuda", g)
                              for s in range(slots) for g in gpus]  # slot-major: a short round spreads over GPUs
    return WorkerPool(handles, device="cuda", gpus=gpus, kind="local")
