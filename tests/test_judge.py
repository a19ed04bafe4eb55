"""agent.harness.judge: which trials' outputs are all zeros (the run-time rules accept an unseen write there)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from agent.harness.judge import _zero_outputs


def test_only_trials_whose_every_output_is_an_all_zero_tensor_count():
    known = [(SimpleNamespace(id=0), [torch.zeros(3), torch.tensor([-0.0])]),
             (SimpleNamespace(id=1), [torch.zeros(3), torch.tensor([0.0, 1e-30])]),
             (SimpleNamespace(id=2), [torch.zeros(0)]),
             (SimpleNamespace(id=3), [0.0]),
             (SimpleNamespace(id=4), [])]
    assert _zero_outputs(known) == frozenset({0})


def test_a_cuda_requirement_met_in_cpu_mode_is_needs_gpu_and_on_a_gpu_the_error_it_is():
    """`assert x.is_cuda` fails only because CPU mode is not a GPU: needs_gpu there (was runtime_error); on a GPU the
    same error is the answer's own, and any other error in CPU mode stays one."""
    from agent.harness.job import WorkerError, WorkerResult
    from agent.harness.judge import judge
    from agent.harness.limit import Limit
    from agent.harness.sandbox import SandboxResult
    from agent.harness.validate import Reference
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
