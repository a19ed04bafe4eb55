"""The parent's verdict on one candidate, from what its sandboxed worker left behind. A worker's message is data,
never a verdict: the parent checks that every trial it asked for came back (and nothing else), compares outputs
itself, applies the run-time rules, checks the timed calls it sampled, and bounds the timing by physics.

Order, first match wins: wrong outputs (incorrect, even where the worker later crashed or hung) -> changes to
torch/triton/the harness at run time (rule_violation) -> timeout -> a dead process -> the candidate's exception ->
trials missing or invented -> run-time rules -> wrong timed calls (incorrect) -> timing rules -> correct.
"""

from __future__ import annotations

from typing import Any

from agent.harness import rules
from agent.harness.job import TrialSpec, WorkerResult
from agent.harness.sandbox import SandboxResult
from agent.harness.validate import Reference, compare, compare_timed
from agent.schema import EvalResult, Verdict


def judge(result: EvalResult, sb: SandboxResult, res: WorkerResult | None, ref: Reference, base: WorkerResult | None,
          outputs: list[list[Any]], timed: list[list[Any]], trials: list[TrialSpec], req: Any, device: str) -> None:
    """Fill result's verdict, message, checks and timing."""
    from agent.harness.pipeline import _phase_words, _sandbox_failure, timing_from

    asked = {t.id for t in trials}
    invented = sorted({r.id for r in (res.trials if res else [])} - asked)
    known = [(r, o) for r, o in zip(res.trials if res else [], outputs) if r.id in asked]
    v = compare(ref, [r for r, _ in known], [o for _, o in known], res.config_labels if res else []) if known else None
    if v is not None:
        result.checks = v.checks
        if not v.passed:
            result.verdict, result.message = Verdict.INCORRECT, v.message
            return
    if res is not None and res.tampered:
        shown = ", ".join(res.tampered[:4]) + (f" (+{len(res.tampered) - 4} more)" if len(res.tampered) > 4 else "")
        result.verdict = Verdict.RULE_VIOLATION
        result.message = (f"the candidate changed or reached into the harness's world at run time ({shown}): "
                          "monkeypatching and introspection are not allowed [tampering]")
        return
    if sb.timed_out:
        phase = f" while {_phase_words(res.phase)}" if res else ""
        result.verdict = Verdict.TIMEOUT
        result.message = f"no result within {req.timeout_s:g} s{phase}: an infinite loop or a far too slow kernel?"
        return
    if res is None or (not res.ok and res.error is None):
        result.verdict = Verdict.RUNTIME_ERROR
        result.message = "the candidate's process died: " + _sandbox_failure(sb)
        return
    if res.error is not None:
        result.verdict = Verdict.COMPILE_ERROR if res.error.kind == "compile_error" else Verdict.RUNTIME_ERROR
        result.message = f"{_phase_words(res.error.phase)}: {res.error.message}"
        return
    passes = max(1, res.config_passes)
    if invented or len(res.trials) != len(trials) * passes or len(outputs) != len(res.trials) or \
            any(r.id != trials[i % len(trials)].id for i, r in enumerate(res.trials)):
        result.verdict = Verdict.RULE_VIOLATION
        result.message = (f"the candidate's process reported {len(res.trials)} trials ({len(outputs)} outputs) where "
                          f"the harness asked for {len(trials)} x {passes}" + (f", and trials it never asked for "
                          f"({invented[:5]})" if invented else "") + ": the report was tampered with [tampering]")
        return
    reference_traces = {t.id: t.trace for t in ref.trials if t.trace is not None}
    broken = rules.judge(res.trials, reference_traces, req.stage.rules)
    if broken:
        result.verdict, result.message = Verdict.RULE_VIOLATION, broken + " [run-time]"
        return
    result.verdict, result.message = Verdict.CORRECT, v.message if v else "correct"
    if res.timing is None:
        return
    t = res.timing
    wrong = compare_timed(ref, t.sampled, timed, t.repeats)
    if wrong:
        result.verdict, result.message = Verdict.INCORRECT, wrong
        return
    if t.launches_min == 0:
        result.verdict = Verdict.RULE_VIOLATION
        result.message = ("a timed call launched no Triton kernel: the candidate's kernels must run on every call "
                          "[run-time]")
        return
    timing = timing_from(res, ref, base, device)  # type: ignore[arg-type]
    floor = _floor_ms(ref, req.bandwidth_gbs) if device == "cuda" else None
    if floor is not None and timing.candidate_ms < floor:
        result.verdict = Verdict.RULE_VIOLATION
        result.message = (f"timing not credible: {timing.candidate_ms * 1000:.1f} us per call, below the "
                          f"{floor * 1000:.1f} us it takes to read the inputs once at {req.bandwidth_gbs:g} GB/s "
                          "[timing]")
        return
    result.timing = timing


def _floor_ms(ref: Reference, bandwidth_gbs: float | None) -> float | None:
    if not bandwidth_gbs or not ref.trials or ref.trials[0].trace is None:
        return None
    trace = ref.trials[0].trace
    sizes = {s.id: s.bytes for s in trace.storages}
    return rules.floor_ms(sum(sizes.get(i, 0) for i in set(trace.inputs)), bandwidth_gbs)
