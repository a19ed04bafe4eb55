"""agent.harness.judge.verdict: the ablated call's verdict (agent.harness.worker.ablation): an output still right with every
launch's writes destroyed was not computed by the kernels; a wrong one, NaN, or an exception means they did."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from agent.harness.judge.validate import still_right
from agent.harness.job import Ablated, TrialRecord, WorkerResult
from agent.harness.judge.verdict import _ablated
from agent.harness.judge.validate import Reference

TRUTH = torch.linspace(-1.0, 1.0, 12, dtype=torch.float64).reshape(3, 4)
REF = Reference(trials=[TrialRecord(id=4, size="cpu", distribution="randn", buffer="fresh", eager_errors=[1e-7])],
                truths=[[TRUTH]])


def result(trial: int = 4, error: str | None = None) -> WorkerResult:
    return WorkerResult(mode="evaluate", ok=True, ablated=Ablated(trial=trial, launches=2, error=error))


def test_an_output_still_right_after_the_writes_were_destroyed_is_refused():
    msg = _ablated(result(), REF, (4, [[TRUTH.float()]]), "fp32")
    assert msg and "still right when every Triton launch's writes are destroyed" in msg and "2 launches" in msg
    assert "the kernels did not compute it" in msg


def test_nan_a_wrong_value_or_an_exception_show_the_kernels_did_the_work():
    nan = TRUTH.float().clone()
    nan[0, 0] = float("nan")
    assert _ablated(result(), REF, (4, [[nan]]), "fp32") is None
    assert _ablated(result(), REF, (4, [[TRUTH.float() + 0.1]]), "fp32") is None
    assert _ablated(result(error="IndexError: out of bounds"), REF, (4, [[]]), "fp32") is None


def test_an_ablated_call_asked_for_and_missing_or_elsewhere_is_tampering():
    bare = WorkerResult(mode="evaluate", ok=True)
    assert "[tampering]" in (_ablated(bare, REF, (4, []), "fp32") or "")
    assert "[tampering]" in (_ablated(result(trial=5), REF, (4, [[TRUTH.float()]]), "fp32") or "")
    assert _ablated(bare, REF, (None, []), "fp32") is None  # none asked (a job from before ablation)


def test_still_right_names_each_floating_output_within_its_tolerance():
    assert still_right(REF, 4, [TRUTH.float()], "fp32") == [0]
    assert still_right(REF, 4, [torch.zeros(3, 4)], "fp32") == []
    assert still_right(REF, 4, [TRUTH.float().reshape(4, 3)], "fp32") == []  # another shape is not right
    assert still_right(REF, 9, [TRUTH.float()], "fp32") == []  # no such trial


def test_a_cuda_requirement_met_in_cpu_mode_is_needs_gpu_and_on_a_gpu_the_error_it_is():
    """`assert x.is_cuda` fails only because CPU mode is not a GPU: needs_gpu there (was runtime_error); on a GPU the
    same error is the answer's own, and any other error in CPU mode stays one."""
    from agent.harness.job import WorkerError, WorkerResult
    from agent.harness.judge.verdict import judge
    from agent.harness.wall.limit import Limit
    from agent.harness.wall.sandbox import SandboxResult
    from agent.harness.judge.validate import Reference
    from agent.schema import EvalResult, Verdict

    def verdict(message: str, device: str) -> EvalResult:
        res = WorkerResult(mode="evaluate", phase="validate",
                           error=WorkerError(kind="runtime_error", phase="validate", message=message))
        result = EvalResult(verdict=Verdict.RUNTIME_ERROR, message="", device=device)
        judge(result, SandboxResult(returncode=1), res, Reference(trials=[], truths=[]), None, [], [], [],
              SimpleNamespace(precision="fp32"), device, Limit(60, "test"))
        return result

    cuda = "AssertionError:  (candidate line 31: `assert x.is_cuda`)"
    on_cpu = verdict(cuda, "cpu")
    assert on_cpu.verdict == Verdict.NEEDS_GPU and "requires CUDA" in on_cpu.message and "assert x.is_cuda" in on_cpu.message
    assert verdict(cuda, "cuda").verdict == Verdict.RUNTIME_ERROR
    assert verdict("RuntimeError: shape '[3, -1]' is invalid (candidate line 4: `y = x.view(3, -1)`)",
                   "cpu").verdict == Verdict.RUNTIME_ERROR


def test_an_empty_output_says_nothing_of_who_computed_it():
    """An exclusive cumsum whose Model trims the batch ([:-1]): at a batch of 1 the output has no rows, right
    whatever the launches wrote. The draw of the ablated trial fell there for a correct public answer, refused as
    'still right when every launch's writes are destroyed' (was)."""
    empty = torch.zeros(0, 4, dtype=torch.float64)
    ref = Reference(trials=[TrialRecord(id=1, size="cpu-wide", distribution="randn", buffer="fresh",
                                        eager_errors=[0.0])], truths=[[empty]])
    assert still_right(ref, 1, [empty.float()], "fp32") == []
    assert _ablated(result(trial=1), ref, (1, [[empty.float()]]), "fp32") is None


def test_tf32_is_named_only_for_a_dot_at_its_default_precision():
    from agent.harness.judge.verdict import default_precision_dot

    assert default_precision_dot("acc = tl.dot(a, b, acc)")
    assert default_precision_dot("acc += tl.dot(a, b, input_precision='tf32')")
    assert not default_precision_dot("acc = tl.dot(a, b, acc, input_precision='ieee')")
    assert not default_precision_dot("acc = tl.dot(a, b, allow_tf32=False)")
    assert not default_precision_dot("y = tl.sum(x * w, axis=0).to(tl.float16)")  # an fp16 cast: not TF32's


def test_a_rule_broken_while_timed_keeps_its_id_last():
    from agent.harness.judge.verdict import while_timed

    assert while_timed("PyTorch computed over 2 MB [work-share]") == "PyTorch computed over 2 MB (while timed) [work-share]"
    assert while_timed("a message without an id") == "a message without an id (while timed)"
    assert while_timed("see [1] first") == "see [1] first (while timed)"  # a bracket mid-text is no id


def test_verdicts_judged_in_parallel_threads_never_meet_cpythons_shared_ast_depth(monkeypatch):
    """CPython 3.11 keeps the AST constructor's recursion depth in state threads share: a collection in the middle of
    one parse that lets another thread parse made the round's fourth verdict a harness error ("AST constructor
    recursion depth mismatch", python/cpython#106905). A garbage-collector callback that yields forces the switch."""
    import gc
    import threading
    import time
    from pathlib import Path

    from agent.harness.judge.verdict import default_precision_dot

    code = (Path(__file__).parent / "candidates" / "legit_type_checking_namespace_kernels.py").read_text() * 2
    errors: list[BaseException] = []

    def judge_many() -> None:
        try:
            for _ in range(40):
                default_precision_dot(code)
        except BaseException as e:  # noqa: BLE001 (the assertion below names it)
            errors.append(e)

    def yield_thread(phase: str, info: dict) -> None:
        time.sleep(0)

    threshold = gc.get_threshold()
    gc.set_threshold(50)
    gc.callbacks.append(yield_thread)
    try:
        threads = [threading.Thread(target=judge_many) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.callbacks.remove(yield_thread)
        gc.set_threshold(*threshold)
    assert errors == []
