"""A round's verdicts in the caller's thread, as each becomes final, from any agent.protocols.Evaluator.

The evaluator runs in a helper thread and reports through `on_result`; the caller (the loop) records and shows each
candidate as it lands, so a long round shows its first verdicts at once and a stopped run keeps every finished one.
Everything that touches the store stays in the caller's thread (SQLite connections are per thread).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from agent.protocols import Evaluator
from agent.schema import EvalResult, Stage

_POLL_S = 0.25  # the caller wakes this often, so a signal's handler runs promptly
# When the caller stops early (a signal: the sandboxes are already killed), the round's thread is given this long to
# unwind before the process goes on to exit: a thread left inside torch's C++ code at interpreter exit aborts the
# process (seen on an H100: "terminate called without an active exception", exit -6 instead of 143).
_UNWIND_S = 30.0


def as_finished(evaluator: Evaluator, sources: list[str], stage: Stage | list[Stage]) -> Iterator[tuple[int, EvalResult]]:
    """(index, result) for every source, in the order the verdicts become final; the evaluator's own error, if it
    fails, is raised here. An evaluator that reports nothing early yields everything when the round ends."""
    events: queue.Queue[tuple[str, object, object]] = queue.Queue()

    def work() -> None:
        try:
            events.put(("all", evaluator.evaluate(sources, stage, on_result=lambda i, r: events.put(("one", i, r))),
                        None))
        except BaseException as e:  # handed to the caller's thread, which raises it
            events.put(("error", e, None))

    thread = threading.Thread(target=work, name="agent-round", daemon=True)
    thread.start()
    try:
        yield from _drain(events, len(sources))
    finally:
        thread.join(_UNWIND_S)


def _drain(events: queue.Queue[tuple[str, object, object]], n: int) -> Iterator[tuple[int, EvalResult]]:
    seen: set[int] = set()
    while True:
        try:
            kind, a, b = events.get(timeout=_POLL_S)
        except queue.Empty:
            continue
        if kind == "error":
            assert isinstance(a, BaseException)
            raise a
        if kind == "one":
            assert isinstance(a, int) and isinstance(b, EvalResult)
            if a not in seen and 0 <= a < n:
                seen.add(a)
                yield a, b
            continue
        assert isinstance(a, list)
        if len(a) != n:
            raise RuntimeError(f"the evaluator returned {len(a)} results for {n} answers")
        for i, result in enumerate(a):
            if i not in seen:
                yield i, result
        return
