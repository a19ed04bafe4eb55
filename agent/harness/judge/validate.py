"""Parent-side validation: compare a candidate worker's outputs with the reference worker's truths.

Runs in the agent's own process (never in the candidate's), on CPU tensors loaded with weights_only=True.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict

from agent.harness.judge import kernelbench
from agent.harness.job import TrialRecord
from agent.harness.settings import settings, tolerance
from agent.harness.worker.errors import (  # noqa: F401 (callers import them from here)
    SHAKES, eager_errors, errors_vs_fp64, rel_error, scale_fit, shaken, worst_index,
)
from agent.harness.worker.truth import representable, wrong_in_kind  # noqa: F401
from agent.schema import Check


class Reference(BaseModel):
    """The truth for one (problem, sizes, seed, device): trial records and fp64 truths in trial order, and the
    truths of the timing pool (the inputs placed among the timed calls)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    trials: list[TrialRecord]
    truths: list[list[Any]]
    pool: list[list[Any]] = []
    eager_ms: float | None = None

    def index(self) -> dict[int, int]:
        return {t.id: i for i, t in enumerate(self.trials)}


class Comparison(BaseModel):
    """What comparing the candidate's outputs with the truths found (agent.schema.Verdict is the final verdict)."""

    passed: bool
    checks: list[Check]
    message: str


def _error(o: Any, t: Any, precision: str) -> float:
    """One output's error as `precision` measures it (kernelbench: element-wise, agent.harness.judge.kernelbench)."""
    return kernelbench.error(o, t) if precision == "kernelbench" else rel_error(o, t)


def _tolerance(eager_error: float, precision: str) -> float:
    return kernelbench.tolerance() if precision == "kernelbench" else tolerance(eager_error, precision)


def _fmt_shape(shape: list[int]) -> str:
    return "x".join(map(str, shape)) if shape else "scalar"


def eager_by_output(ref: Reference) -> dict[str, list[float]]:
    """Per size, per output: eager fp32's worst error against the truth over the size's trials, the base of each
    output's tolerance there. The problem's, not one draw's: where an output is numerically zero (KernelBench #23:
    the mean of a group norm's output) eager's error is rounding noise that varies 4x between draws. Where eager is
    off by more than the output itself (relative > 1: no correct digit), the noise differs even between processes
    (the fp64 truth is noise too: #23's one-draw cpu-wide size gave eager 834 in one run and 1.9e3 in the next, an
    honest answer 175 and 2.5e3), so that output at every such size gets the worst noise seen at any of them. Per
    output: one numerically-zero output never widens another's tolerance."""
    at: dict[str, list[float]] = {}
    for t in ref.trials:
        errors = t.eager_errors or [t.eager_error or 0.0]  # records from before per-output errors: one for all
        mine = at.setdefault(t.size, [])
        mine.extend([0.0] * (len(errors) - len(mine)))
        for k, e in enumerate(errors):
            mine[k] = max(mine[k], e)
    outputs = max((len(v) for v in at.values()), default=0)
    noise = [max((v[k] for v in at.values() if k < len(v) and 1.0 < v[k] < math.inf), default=0.0)
             for k in range(outputs)]  # an infinite error is no noise level (agent.harness.settings.tolerance)
    return {size: [noise[k] if 1.0 < e < math.inf else e for k, e in enumerate(v)] for size, v in at.items()}


SIGNIFICANT = 4.0  # standard errors a constant factor must stand out of an answer's own scatter (constant-factor)


def eager_scales_by_output(ref: Reference) -> dict[str, list[float]]:
    """Per size, per output: eager fp32's largest constant factor over the size's trials (agent.harness.worker.
    errors.scale_fit), the base of the constant-factor test there."""
    at: dict[str, list[float]] = {}
    for t in ref.trials:
        mine = at.setdefault(t.size, [])
        mine.extend([0.0] * (len(t.eager_scales) - len(mine)))
        for k, f in enumerate(t.eager_scales):
            mine[k] = max(mine[k], f)
    return at


def _off_by_a_factor(o: Any, t: Any, rt: TrialRecord, k: int, eager_at: dict[str, list[float]],
                     scales_at: dict[str, list[float]], precision: str) -> str | None:
    """Rule `constant-factor`: an output within its tolerance element by element but the truth times a constant that
    eager's own numerics never reach (a wrong divisor: H*W + 1; a scale off by a little): the failure's note, None if
    it is not. The factor is held to what the worst-element test holds the error to, from eager's factor
    instead of eager's worst element: max(floor, factor x eager's), and must stand out of the answer's own scatter
    (SIGNIFICANT standard errors: a few outputs with honest TF32 noise have a factor as large as their error, many
    outputs a factor far below it, and noise added to hide one fails the worst-element test first). Where eager has no
    correct digit, or the reference predates the factor (a cached record), there is nothing to hold it to."""
    scales = scales_at.get(rt.size, [])
    eager = _eager_for(eager_at, rt.size, k)
    if k >= len(scales) or not eager <= 1.0 or o.numel() < 2 or not o.is_floating_point():
        return None
    (off, noise), tol = scale_fit(o, t), _tolerance(scales[k], precision)
    if abs(off) <= max(tol, SIGNIFICANT * noise):
        return None
    return (f"output {k} is the truth times {1 + off:.6g} throughout: a constant factor off by {abs(off):.3g}, beyond "
            f"the {tol:.3g} eager's numerics allow (eager fp32's own factor at this size: {scales[k]:.2g}): a wrong "
            "divisor or scale? [constant-factor]")


def _eager_for(eager_at: dict[str, list[float]], size: str, k: int) -> float:
    errors = eager_at.get(size, [])
    return errors[k] if k < len(errors) else max(errors, default=0.0)


def structure(kind: str) -> str:
    """What a caller of forward can rely on, from inputs.flatten's kind: a tensor, or a sequence of n tensors (a tuple
    and a list unpack and index alike: `a, b = model(x)`). A 1-tuple is not a tensor: `model(x) * 2` fails on it."""
    if kind.startswith(("tuple[", "list[")):
        return "sequence" + kind[kind.index("["):]
    return kind


def _kind_words(kind: str) -> str:
    if kind == "tensor":
        return "a tensor"
    if kind.startswith(("tuple[", "list[")):
        n = kind[kind.index("[") + 1:-1]
        return f"a {kind[:kind.index('[')]} of {n} tensor{'' if n == '1' else 's'}"
    return kind


def compare(ref: Reference, trials: list[TrialRecord], outputs: list[list[Any]], config_labels: list[str],
            precision: str = "fp32", tf32_dot: bool = True, on_gpu: bool = False) -> Comparison:
    """One Check per candidate trial; the verdict fails on the first class of problem, with the worst case described.
    Over 80 lines: one pass over the trials, each class of problem in the order the verdict names the first."""
    import torch

    index = ref.index()
    eager_at, scales_at = eager_by_output(ref), eager_scales_by_output(ref)
    checks: list[Check] = []
    failures: list[tuple[float, str]] = []  # (severity, description)
    factors = 0  # failures of the constant-factor rule (their errors are within the worst-element tolerance)
    previous: dict[tuple[int, str], list[Any]] = {}
    for i, (trial, outs) in enumerate(zip(trials, outputs)):
        r = index.get(trial.id)
        if r is None:
            continue  # the parent refused unknown trial ids before comparing (pipeline)
        rt, truth = ref.trials[r], ref.truths[r]
        tols = [_tolerance(_eager_for(eager_at, rt.size, k), precision) for k in range(max(1, len(truth)))]
        tol, nearest = tols[0], 0  # the tolerance shown: that of the output nearest its own
        where = f"size {trial.size} (inputs {', '.join(_fmt_shape(s) for s in rt.input_shapes)}), {trial.distribution} inputs, {trial.buffer}"
        if len(config_labels) > 1:
            where += f", autotune config {trial.config_pass} ({config_labels[trial.config_pass] if trial.config_pass < len(config_labels) else '?'})"
        note, error, factor = "", None, False
        if not outs:
            note = f"forward returned {trial.output_kind}"
        elif structure(trial.output_kind) != structure(rt.output_kind):
            note = f"forward returned {_kind_words(trial.output_kind)}, the Model returns {_kind_words(rt.output_kind)}"
        elif len(outs) != len(truth):
            note = f"forward returned {len(outs)} tensors, expected {len(truth)}"
        else:
            for k, (o, t) in enumerate(zip(outs, truth)):
                want_dtype = rt.output_dtypes[k]
                if list(o.shape) != list(t.shape):
                    note = f"output {k} has shape {list(o.shape)}, expected {list(t.shape)}"
                    break
                if str(o.dtype).removeprefix("torch.") != want_dtype:
                    note = f"output {k} has dtype {str(o.dtype).removeprefix('torch.')}, expected {want_dtype}"
                    break
                if o.is_floating_point():
                    nonfinite = ~torch.isfinite(o) & torch.isfinite(representable(t, o.dtype))
                    if bool(nonfinite.any()):
                        idx = tuple(int(v) for v in nonfinite.nonzero()[0])
                        what = "NaN" if bool(torch.isnan(o).any()) else "Inf"
                        note = f"output {k} contains {what} (first at index {list(idx)}; {int(nonfinite.sum())} of {o.numel()} elements)"
                        if not math.isfinite(_eager_for(eager_at, rt.size, k)):
                            note += (" where the fp64 truth is finite; the problem's own Model is non-finite there in "
                                     "fp32 too (an intermediate overflow): only an answer that avoids it is right")
                        break
                e = _error(o, t, precision)
                if error is None or e / tols[k] > error / tol:  # the output nearest its own tolerance speaks
                    error, tol, nearest = e, tols[k], k
                if e > tols[k]:
                    idx = worst_index(o, t)
                    note = f"output {k} at index {list(idx)}: got {float(o[idx]):.6g}, expected {float(t[idx]):.6g}"
                    prev = previous.get((trial.config_pass, trial.size))
                    if prev is not None and len(prev) > k and prev[k].shape == o.shape and torch.equal(prev[k], o):
                        note += " — identical to the previous call's output although the input changed (cached?)"
                    break
                if precision != "kernelbench" and (off := _off_by_a_factor(o, t, rt, k, eager_at, scales_at,
                                                                           precision)):
                    note, factor = off, True
                    break
        if not note and trial.input_digests != rt.input_digests:
            changed = [str(j) for j, (a, b) in enumerate(zip(trial.input_digests, rt.input_digests)) if a != b]
            note = f"forward modified its input {', '.join(changed)} in place"
        passed = not note
        checks.append(Check(
            size=trial.size, shapes=rt.input_shapes, distribution=trial.distribution, error=error,
            eager_error=rt.eager_error, tolerance=tol, passed=passed,
            note=f"{trial.buffer}" + (f"; {note}" if note else "")
            + (f"; config {trial.config_pass}" if len(config_labels) > 1 else ""),
        ))
        previous[(trial.config_pass, trial.size)] = outs
        if not passed:
            severity = float("inf") if error is None else error / tol
            detail = f"{where}: {note}"
            if error is not None and error > tol and precision == "kernelbench":
                detail += f"; error {error:.3g} > tolerance {tol:.3g} ({kernelbench.words()}: --precision kernelbench)"
            elif error is not None and error > tol and not factor:
                detail += (f"; relative error {error:.3g} > tolerance {tol:.3g} (eager fp32 at this size: "
                           f"{_eager_for(eager_at, rt.size, nearest):.3g}"
                           + ("; --precision tf32" if precision == "tf32" else "") + ")")
            failures.append((severity if not factor else 1.0, detail))
            factors += factor
    if not checks:
        return Comparison(passed=False, checks=checks, message="no validation trial completed")
    if failures:
        failures.sort(key=lambda f: -f[0])
        n = len(failures)
        msg = f"incorrect in {n} of {len(checks)} trials; worst: {failures[0][1]}"
        worst_error = max((c.error or 0.0 for c in checks if not c.passed), default=0.0)
        tf32_sized = precision == "fp32" and not factors and \
            0.0 < worst_error <= settings().validation.tf32_tolerance_floor
        if tf32_sized and tf32_dot:
            # the size of TF32's rounding: tl.dot's default on a GPU, the commonest cause in an honest answer
            msg += ("; an error of TF32's size: tl.dot rounds its inputs to TF32 by default, pass "
                    "input_precision=\"ieee\" (or \"tf32x3\") for fp32 accuracy, or run with --precision tf32")
        elif tf32_sized and on_gpu:
            # no tl.dot: PyTorch's own layers (cuDNN picks its algorithm by layout and shape: channels-last took TF32
            # where eager's NCHW conv did not, KernelBench #67 on an H200)
            msg += ("; an error of TF32's size: on a GPU PyTorch's convolutions may run in TF32 "
                    "(torch.backends.cudnn.allow_tf32 is on by default) and cuDNN picks its algorithm by layout and "
                    "shape: keep eager's layout for the layers left in PyTorch, or run with --precision tf32")
        return Comparison(passed=False, checks=checks, message=msg)
    worst = max(checks, key=lambda c: (c.error or 0.0) / (c.tolerance or 1.0))
    if precision == "kernelbench":
        return Comparison(passed=True, checks=checks, message=f"correct on {len(checks)} trials by "
                          f"{kernelbench.words()} (--precision kernelbench); worst error {worst.error:.3g} "
                          f"(tolerance {worst.tolerance:.3g})")
    return Comparison(passed=True, checks=checks,
                   message=f"correct on {len(checks)} trials; worst relative error {worst.error:.3g} (tolerance {worst.tolerance:.3g})")


def compare_timed(ref: Reference, sampled: list[int], outputs: list[list[Any]], reps: int,
                  optional: range = range(0), precision: str = "fp32") -> str | None:
    """The timed calls whose inputs the reference knows: every one must be right (a memoised result is not), each
    once. `optional`: pool indices that may be missing (the energy loop's, where energy was not measured)."""
    wanted = set(range(len(ref.pool))) - set(optional)
    if not wanted <= set(sampled) <= set(range(len(ref.pool))) or len(set(sampled)) != len(sampled) or \
            len(outputs) != len(sampled):
        return (f"timing returned {len(outputs)} of the {len(wanted)} checked outputs the harness asked for: the timed "
                "calls cannot be verified")
    timed_size = ref.trials[0].size if ref.trials else ""
    eager_at = eager_by_output(ref)
    for n, (k, outs) in enumerate(zip(sampled, outputs)):
        truth = ref.pool[k]
        if len(outs) != len(truth):
            return (f"a timed call ({n + 1} of {len(sampled)} checked among {reps}) returned {len(outs)} outputs, "
                    f"expected {len(truth)}")
        for j, (o, t) in enumerate(zip(outs, truth)):
            error, tol = _error(o, t, precision), _tolerance(_eager_for(eager_at, timed_size, j), precision)
            if error > tol:
                what = "error" if precision == "kernelbench" else "relative error"
                return (f"a timed call ({n + 1} of {len(sampled)} checked among {reps}) returned a wrong output for "
                        f"new values in the same buffers: {what} {error:.3g} > tolerance {tol:.3g} (a result "
                        "memoised across calls?)")
    return None


def still_right(ref: Any, trial_id: int, outputs: list[Any], precision: str) -> list[int]:
    """The ablated call (agent.harness.worker.ablation): indices of the ablated call's floating outputs that are still within the tolerance of the
    truth of the trial whose inputs it ran on."""
    import torch

    r = ref.index().get(trial_id)
    if r is None:
        return []
    rt, truth = ref.trials[r], ref.truths[r]
    eager_at = eager_by_output(ref)
    right = []
    for k, (o, t) in enumerate(zip(outputs, truth)):
        if not isinstance(o, torch.Tensor) or not o.is_floating_point() or list(o.shape) != list(t.shape):
            continue
        if o.numel() == 0:  # nothing to destroy: an empty output (a batch of 1 trimmed by [:-1]) is right by default
            continue
        if not bool(torch.isfinite(o).all()):
            continue
        if rel_error(o, t) <= tolerance(_eager_for(eager_at, rt.size, k), precision):
            right.append(k)
    return right
