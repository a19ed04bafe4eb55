"""The report's summary, in words: how the run's best stands against torch.compile and eager on each clock (with
both figures), how many iterations ran against the bars the verdict chart draws, and, for a run that did not
finish, why it stopped and the exact command that continues it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from agent.schema import Candidate, Timing
from agent.store import IterationRecord, RunRecord
from agent.view.fmt import fmt_mj, fmt_ms

CLOCK_WORDS = {"device": "the device clock (the GPU's time, calls queued back to back)",
               "latency": "the latency clock (one synchronized call, host included)"}


def _versus(what: str, best: float, base: float, name: str, fmt=fmt_ms, better: str = "faster") -> str:
    """One comparison in words with both figures: on `what`, who beats whom, and by how much."""
    if best < base:
        return f"on {what}, the best beats {name}: {fmt(best)} against {name}'s {fmt(base)} " \
               f"({base / best:.2f}× {better})"
    if best > base:
        return f"on {what}, {name} beats the best: {fmt(base)} against the best's {fmt(best)} " \
               f"({best / base:.2f}× {better} than the best)"
    return f"on {what}, the best ties {name}: {fmt(best)} each"


def standing(best: Candidate | None, baselines: Timing | None, objective: str) -> list[str]:
    """Sentences: the best against torch.compile, then eager, on each clock (the run's objective first), and in
    energy per call where it was measured. Figures are the best's own evaluation's, else the run's last baselines."""
    t = best.result.timing if best is not None else None
    if t is None:
        return ["no correct candidate was timed: nothing to compare with eager or torch.compile"]
    if not t.meaningful:
        eager = _pick(t, baselines, "eager_latency_ms")
        return [f"CPU mode (TRITON_INTERPRET=1): no speedup is meaningful: the best took {fmt_ms(t.latency_ms)} in "
                f"Triton's interpreter, eager PyTorch {fmt_ms(eager)} on the CPU; torch.compile was not timed"]
    first = "latency" if objective == "latency" else "device"
    out = []
    for name, key in (("torch.compile", "compile"), ("eager", "eager")):
        for clock in (first, "device" if first == "latency" else "latency"):
            mine, base = getattr(t, f"{clock}_ms"), _pick(t, baselines, f"{key}_{clock}_ms")
            if mine is None or base is None:
                if key == "compile" and clock == first:
                    out.append(f"torch.compile was not timed on {CLOCK_WORDS[clock].split(' (')[0]}")
                continue
            out.append(_versus(CLOCK_WORDS[clock], mine, base, name))
        mj, base_mj = t.energy_mj, _pick(t, baselines, f"{key}_energy_mj")
        if mj is not None and base_mj is not None:
            out.append(_versus("energy per call", mj, base_mj, name, fmt_mj, "less energy"))
    if t.compile_fp32_device_ms is not None and t.compile_error is not None:
        out.append(f"torch.compile's own error ({t.compile_error:.2g}) is outside the tolerance "
                   f"({t.compile_tolerance or 0:.2g}): with TF32 off it takes {fmt_ms(t.compile_fp32_device_ms)} "
                   "on the device clock")
    return [s[0].upper() + s[1:] if s.startswith("on ") else s for s in out]


def _pick(t: Timing, baselines: Timing | None, field: str) -> float | None:
    mine = getattr(t, field)
    return mine if mine is not None or baselines is None else getattr(baselines, field)


def _latest(iterations: list[IterationRecord]) -> dict[int, IterationRecord]:
    """Each iteration's latest attempt."""
    out: dict[int, IterationRecord] = {}
    for it in iterations:
        if it.iteration not in out or it.attempt > out[it.iteration].attempt:
            out[it.iteration] = it
    return out


def cut_short(run: RunRecord, iterations: list[IterationRecord]) -> int | None:
    """The iteration a stop cut short (begun, not complete), if any: the store's rule (agent.store.index)."""
    latest = _latest(iterations)
    if not latest or run.status in ("finished", "failed"):
        return None
    last = max(latest)
    return last if last > 0 and not latest[last].completed else None


def iterations_text(run: RunRecord, iterations: list[IterationRecord], cands: list[Candidate]) -> str:
    """'3 of 5 done (i1–i3), i4 cut short after 2 candidates; i0 judged the starting kernel · 14 candidates': the
    count the verdict chart's bars (i0, i1, ...) agree with."""
    done, asked = run.iterations, run.config.iterations
    text = f"{done} of {asked} done" + (f" (i1–i{done})" if done > 1 else " (i1)" if done == 1 else "")
    cut = cut_short(run, iterations)
    if cut is not None:
        n = sum(1 for c in cands if c.iteration == cut)
        text += f", i{cut} cut short after {n} candidate{'s' if n != 1 else ''}"
    if any(c.iteration == 0 for c in cands):
        text += "; i0 judged the starting kernel"
    return f"{text} · {len(cands)} candidate{'s' if len(cands) != 1 else ''}"


@dataclass
class Stopped:
    """Why a run that did not finish stopped, in words, and the command that continues it."""

    why: str
    resume: str


def stopped(run: RunRecord, iterations: list[IterationRecord], cands: list[Candidate],
            root: Path | None) -> Stopped | None:
    """For an interrupted or failed run: why it stopped (from what the run recorded) and `agent run --resume`."""
    if run.status not in ("interrupted", "failed"):
        return None
    last = max([run.started_at, *(c.created_at for c in cands), *(it.started_at for it in iterations)])
    at = run.finished_at or last
    s = int(max((at - run.started_at).total_seconds(), 0.0))
    when = f"at {at.strftime('%H:%M:%S UTC')}, {s // 60}m{s % 60:02d}s in"
    if run.stop_reason and run.status == "failed":
        why = f"the run stopped on an error {when}: {run.stop_reason}"
    elif run.stop_reason:  # "stopped by SIGTERM": the run recorded which signal
        why = (f"{run.stop_reason} {when}; the run killed its candidates' sandboxes and recorded the stop")
    elif run.status == "failed":
        why = f"the run stopped on an error {when} (its message went to the terminal; the store keeps no copy)"
    elif run.finished_at is not None:  # the run wrote "interrupted" itself: a stop signal reached it
        why = (f"stopped by a signal {when}: Ctrl-C (SIGINT), SIGTERM (timeout, a scheduler, a container stop) or "
               "SIGHUP (a closed terminal); the run killed its candidates' sandboxes and recorded the stop (which "
               "signal is not recorded)")
    else:  # the store found its process gone: it never got to say so
        host = f" on {run.host}" if run.host else ""
        why = (f"its process (pid {run.pid}{host}) ended without recording a stop, after its last record "
               f"{when}: killed (SIGKILL, out of memory) or its machine went down")
    cut = cut_short(run, iterations)
    if cut is not None:
        n, k = sum(1 for c in cands if c.iteration == cut), run.config.samples
        why += f"; iteration {cut} had judged {n} of {k} candidates (a resume asks it again; nothing judged is lost)"
    elif run.iterations < run.config.iterations:
        why += f"; {run.iterations} of {run.config.iterations} iterations were done"
    command = f"agent run --resume {run.id}"
    if root is not None:  # the store this page was read from, wherever the reader's shell is
        command += f" --root {shlex.quote(str(root.expanduser().resolve()))}"
    return Stopped(why=why, resume=command)
