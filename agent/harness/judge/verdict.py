"""The parent's verdict on one candidate, from what its sandboxed worker left behind. A worker's message is data,
never a verdict: the parent checks that every trial it asked for came back (and nothing else), compares outputs
itself, applies the run-time rules, checks the timed calls it sampled, and bounds the timing by physics.

Order, first match wins: wrong outputs (incorrect, even where the worker later crashed or hung) -> changes to
torch/triton/the harness at run time (rule_violation) -> timeout -> a dead process -> the candidate's exception (in
CPU mode one that says it requires CUDA: needs_gpu) ->
trials missing or invented -> run-time rules -> wrong timed calls (incorrect) -> timing rules -> correct.
"""

from __future__ import annotations

import ast

from typing import Any

from agent.harness.static import gpuonly
from agent.harness.static.parsing import PARSING
from agent.harness.judge import rules
from agent.harness.judge.validate import still_right
from agent.harness.job import Device, TrialSpec, WorkerResult
from agent.harness.wall.limit import Limit
from agent.harness.wall.sandbox import SandboxResult
from agent.harness.settings import widened
from agent.harness.judge.validate import Reference, compare, compare_timed
from agent.schema import EvalResult, Objective, Timing, Verdict


def default_precision_dot(code: str) -> bool:
    """Whether the answer calls tl.dot at its default precision (TF32 for fp32 operands, on a GPU and in CPU mode):
    only then is an error of TF32's size worth naming as tl.dot's (an fp16 cast or a dropped term has one too)."""
    try:
        with PARSING:  # a round's verdicts are judged in the pool's threads
            tree = ast.parse(code)
    except SyntaxError:
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (isinstance(node.func, ast.Attribute) and node.func.attr == "dot" or
                                           isinstance(node.func, ast.Name) and node.func.id == "dot"):
            kw = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
            if kw.get("input_precision") not in ("ieee", "tf32x3") and kw.get("allow_tf32", True) is not False:
                return True
    return False


def judge(result: EvalResult, sb: SandboxResult, res: WorkerResult | None, ref: Reference, base: WorkerResult | None,
          outputs: list[list[Any]], timed: list[list[Any]], trials: list[TrialSpec], req: Any, device: str,
          limit: Limit, energy_pool: range = range(0),
          ablation: tuple[int | None, list[list[Any]]] = (None, [])) -> None:
    """Fill result's verdict, message, checks and timing. `energy_pool`: the timing pool's indices checked in the
    energy loop (their outputs come back only where energy was measured). `ablation`: the trial after which the
    worker was asked for an ablated call, and that call's outputs (agent.harness.worker.ablation). Over 80 lines: the
    verdicts in the order they take precedence, read top to bottom in one place."""
    asked = {t.id for t in trials}
    invented = sorted({r.id for r in (res.trials if res else [])} - asked)
    known = [(r, o) for r, o in zip(res.trials if res else [], outputs) if r.id in asked]
    precision = req.precision
    v = compare(ref, [r for r, _ in known], [o for _, o in known], res.config_labels if res else [], precision,
                tf32_dot=default_precision_dot(result.code or ""), on_gpu=device == "cuda") if known else None
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
        queued = f", not counting {sb.queued_s:.0f} s queued for the GPU behind other evaluations" \
            if sb.queued_s >= 1 else ""
        result.message = (f"no result within {limit.seconds:.0f} s{phase} ({limit.why}{queued}): an infinite loop or "
                          "a far too slow kernel?")
        return
    if res is None or (not res.ok and res.error is None):
        result.verdict = Verdict.RUNTIME_ERROR
        result.message = "the candidate's process died: " + sandbox_failure(sb)
        return
    if res.error is not None:
        result.verdict = Verdict.COMPILE_ERROR if res.error.kind == "compile_error" else Verdict.RUNTIME_ERROR
        result.message = f"{_phase_words(res.error.phase)}: {res.error.message}"
        if device == "cpu" and gpuonly.cuda_required(res.error.message):
            result.verdict = Verdict.NEEDS_GPU
            result.message = f"CPU mode cannot judge this answer: it requires CUDA ({result.message}); judge it on a GPU"
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
    broken = rules.judge(res.trials, reference_traces, req.stage.rules) or _ablated(res, ref, ablation, precision)
    if broken:
        result.verdict, result.message = Verdict.RULE_VIOLATION, broken
        return
    result.verdict, result.message = Verdict.CORRECT, v.message if v else "correct"
    traffic = rules.round_trips(res.trials, req.stage.rules)
    if traffic:
        result.message += f"; {traffic}"
    if res.timing is None:
        return
    t = res.timing
    wrong = compare_timed(ref, t.sampled, timed, t.repeats, optional=energy_pool if t.energy_mj is None else range(0),
                          precision=precision)
    if wrong:
        result.verdict, result.message = Verdict.INCORRECT, wrong
        return
    if t.launches_min == 0:
        result.verdict = Verdict.RULE_VIOLATION
        result.message = ("a timed call launched no Triton kernel: the candidate's kernels must run on every call "
                          "[every-call]")
        return
    expected = len(ref.pool) - (len(energy_pool) if t.energy_mj is None else 0)  # energy's checked calls: traced too
    broken = _timed_rules(res, ref, expected, req.stage.rules, timed)
    if broken:
        result.verdict, result.message = Verdict.RULE_VIOLATION, broken
        return
    timing = timing_from(res, ref, base, device, req.objective, precision)  # type: ignore[arg-type]
    floor = _floor_ms(ref, req.bandwidth_gbs) if device == "cuda" else None
    if floor is not None and t.median_ms < floor:  # the device clock: the GPU's own time
        result.verdict = Verdict.RULE_VIOLATION
        result.message = (f"timing not credible: {t.median_ms * 1000:.1f} us per call, below the "
                          f"{floor * 1000:.1f} us it takes to read the inputs once at {req.bandwidth_gbs:g} GB/s "
                          "[timing]")
        return
    result.timing = timing


def _ablated(res: WorkerResult, ref: Reference, ablation: tuple[int | None, list[list[Any]]],
             precision: str) -> str | None:
    """The ablated call's verdict (agent.harness.worker.ablation): None where destroying what the launches wrote made the
    output wrong (or the forward raise); the rule's message where an output is still right."""
    asked, outputs = ablation
    if asked is None:
        return None
    got = res.ablated
    if got is None or got.trial != asked or len(outputs) != 1:
        return (f"the candidate's process reported no ablated call after trial {asked} where the harness asked for "
                "one: the report was tampered with [tampering]")
    if got.error is not None:
        return None
    right = still_right(ref, asked, outputs[0], precision)
    if not right:
        return None
    which = "the returned tensor" if len(outputs[0]) == 1 else f"returned tensor {right[0]}"
    return (f"{which} is still right when every Triton launch's writes are destroyed as it returns (NaN over what it "
            f"stored; {got.launches} launches, on the inputs of trial {asked}): the kernels did not compute it, "
            "PyTorch or Python did [kernels-did-the-work]")


def _timed_rules(res: WorkerResult, ref: Reference, expected: int, stage_rules: Any,
                 outputs: list[list[Any]]) -> str | None:
    """The run-time rules on the checked timed calls (traced where they ran): the work that is timed must be the
    work that was validated. Each checked call must have come back with its trace (the energy loop's where energy
    was measured); `outputs` holds their outputs in the same order."""
    timed = res.timed_trials
    if len(timed) != expected or any(t.trace is None for t in timed):
        return (f"the candidate's process reported {len(timed)} traced timed calls where the harness checked "
                f"{expected}: the report was tampered with [tampering]")
    first = ref.trials[0].trace if ref.trials else None
    broken = rules.judge(timed, {t.id: first for t in timed if first is not None}, stage_rules)
    return while_timed(broken) if broken else None


def while_timed(broken: str) -> str:
    """A run-time rule's message, said of a timed call: the rule's id stays last, where `agent show` reads it."""
    text, sep, tag = broken.rpartition(" [")
    return f"{text} (while timed) [{tag}" if sep and tag.endswith("]") else f"{broken} (while timed)"


def _floor_ms(ref: Reference, bandwidth_gbs: float | None) -> float | None:
    if not bandwidth_gbs or not ref.trials or ref.trials[0].trace is None:
        return None
    trace = ref.trials[0].trace
    sizes = {s.id: s.bytes for s in trace.storages}
    return rules.floor_ms(sum(sizes.get(i, 0) for i in set(trace.inputs)), bandwidth_gbs)


def sandbox_failure(sb: SandboxResult) -> str:
    """Why a worker's process ended without a result, in words."""
    if sb.killed == "memory":
        return f"exceeded the memory limit ({sb.peak_rss_mb:.0f} MB resident)"
    if sb.killed == "output":
        return "printed more than the output limit"
    if sb.signal:
        return f"killed by {sb.signal}" + _trace_hint(sb.stderr)
    lines = [ln for ln in sb.stderr.strip().splitlines() if ln.strip()]
    return f"exit status {sb.returncode}" + (f": {lines[-1].strip()[:400]}" if lines else "")


def _trace_hint(stderr: str) -> str:
    """faulthandler's dump names the candidate's line: 'File ".../candidate.py", line 42 in kernel'."""
    import re

    hits = re.findall(r'File "[^"]*candidate\.py", line (\d+) in (\w+)', stderr)
    if not hits:
        return ""
    line, fn = hits[0]  # faulthandler prints the innermost frame first
    return f" (candidate line {line}, in {fn})"


def _phase_words(phase: str) -> str:
    return {
        "import": "loading the module", "build": "building ModelNew", "validate": "running forward",
        "timing": "timing", "start": "starting", "done": "finishing",
    }.get(phase, phase)


def _compile_tolerance(base: WorkerResult | None, precision: str) -> float | None:
    """The tolerance a candidate gets on the timed inputs (the baseline measures it at fp32), as `precision` holds it."""
    return widened(base.compile_tolerance, precision) if base and base.compile_tolerance is not None else None


def _compile_outside(base: WorkerResult | None, precision: str) -> str:
    """A note where torch.compile's own answer is outside the tolerance a candidate is held to."""
    tol = _compile_tolerance(base, precision)
    if base is None or base.compile_error is None or tol is None or base.compile_error <= tol:
        return ""
    hint = "" if precision == "tf32" else "; --precision tf32 admits TF32's error"
    exact = base.compiled_fp32 if precision == "fp32" else None
    if exact is not None:
        hint += (f"; torch.compile with TF32 off takes {exact.median_ms:.4g} ms on the device clock (relative error "
                 f"{base.compile_fp32_error:.3g})" if base.compile_fp32_error is not None else "")
    return (f"torch.compile's own output is outside the tolerance here (relative error {base.compile_error:.3g} > "
            f"{tol:.3g}): its time is that of an answer this harness would refuse{hint}")


def timing_from(res: WorkerResult, ref: Reference, base: WorkerResult | None, device: Device,
                objective: Objective = "device", precision: str = "fp32") -> Timing:
    """The candidate's two clocks against the baselines' (each on the same clock); the plain fields follow
    `objective`. Without a GPU baseline, eager comes from the reference's CPU-mode timing (one clock)."""
    t = res.timing
    assert t is not None
    eager, comp = (base.eager, base.compiled) if base else (None, None)
    exact = base.compiled_fp32 if base and precision == "fp32" else None
    dev = {"candidate": t.median_ms, "eager": eager.median_ms if eager else ref.eager_ms,
           "compile": comp.median_ms if comp else None, "compile_fp32": exact.median_ms if exact else None}
    lat = {"candidate": t.latency_ms, "eager": eager.latency_ms if eager else ref.eager_ms,
           "compile": comp.latency_ms if comp else None, "compile_fp32": exact.latency_ms if exact else None}
    spreads = {"device": (t.spread_pct, eager.spread_pct if eager else None, comp.spread_pct if comp else None),
               "latency": (t.latency_spread_pct, eager.latency_spread_pct if eager else None,
                           comp.latency_spread_pct if comp else None)}

    def speedup(clock: dict[str, float | None], of: str) -> float | None:
        mine, theirs = clock["candidate"], clock[of]
        return theirs / mine if theirs and mine else None

    on = lat if objective == "latency" and t.latency_ms is not None else dev
    cand_spread, eager_spread, comp_spread = spreads["latency" if on is lat else "device"]
    notes = [n for n in (t.note, base.compile_note if base else "", _compile_outside(base, precision)) if n]
    joules = {"eager": eager.energy_mj if eager else None, "compile": comp.energy_mj if comp else None}
    return Timing(
        objective=objective, candidate_ms=on["candidate"] or t.median_ms, candidate_spread_pct=cand_spread or 0.0,
        device_ms=t.median_ms, device_spread_pct=t.spread_pct, latency_ms=t.latency_ms,
        latency_spread_pct=t.latency_spread_pct, host_ms=t.host_ms, launches=t.launches_max,
        eager_ms=on["eager"], eager_spread_pct=eager_spread, eager_device_ms=dev["eager"], eager_latency_ms=lat["eager"],
        compile_ms=on["compile"], compile_spread_pct=comp_spread, compile_device_ms=dev["compile"],
        compile_latency_ms=lat["compile"], compile_error=base.compile_error if base else None,
        compile_tolerance=_compile_tolerance(base, precision),
        compile_fp32_device_ms=dev["compile_fp32"], compile_fp32_latency_ms=lat["compile_fp32"],
        compile_fp32_error=base.compile_fp32_error if exact and base else None,
        device_speedup_vs_compile_fp32=speedup(dev, "compile_fp32"),
        latency_speedup_vs_compile_fp32=speedup(lat, "compile_fp32"),
        speedup_vs_eager=speedup(on, "eager"), speedup_vs_compile=speedup(on, "compile"),
        device_speedup_vs_eager=speedup(dev, "eager"), latency_speedup_vs_eager=speedup(lat, "eager"),
        device_speedup_vs_compile=speedup(dev, "compile"), latency_speedup_vs_compile=speedup(lat, "compile"),
        energy_mj=t.energy_mj, energy_spread_pct=t.energy_spread_pct, eager_energy_mj=joules["eager"],
        eager_energy_spread_pct=eager.energy_spread_pct if eager else None, compile_energy_mj=joules["compile"],
        compile_energy_spread_pct=comp.energy_spread_pct if comp else None,
        energy_vs_eager=joules["eager"] / t.energy_mj if joules["eager"] and t.energy_mj else None,
        energy_vs_compile=joules["compile"] / t.energy_mj if joules["compile"] and t.energy_mj else None,
        power_w=t.power_w, energy_note="" if t.energy_mj is not None else t.energy_note or "not measured",
        repeats=t.repeats, meaningful=device == "cuda", note="; ".join(notes),
    )
