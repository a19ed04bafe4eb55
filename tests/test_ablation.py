"""agent.harness.worker.ablation: the ablated call's destroyed bytes, and putting them back."""

from __future__ import annotations

import math

import torch

from agent.harness.worker.ablation import Ablation


def test_a_forward_under_inference_mode_has_its_arguments_destroyed_and_restored_after_it_returns():
    """The GPU's path: the launch hook runs inside the forward's @torch.inference_mode, the restore after it, outside
    (was: "Inplace update to inference tensor outside InferenceMode", an honest answer refused as runtime_error)."""
    ablation = Ablation(torch, torch._C._InferenceMode)
    with torch.inference_mode():
        out = torch.full((6,), 2.5)
        weight = torch.ones(3)
        ablation.destroy_arguments([out, weight, torch.arange(4)], protected={weight.untyped_storage().data_ptr()})
        assert all(math.isnan(v) for v in out.tolist()) and weight.tolist() == [1.0] * 3
    assert out.is_inference()
    ablation.restore()
    assert out.tolist() == [2.5] * 6


def test_a_plain_forward_is_restored_too_and_integers_are_never_touched():
    ablation = Ablation(torch, torch._C._InferenceMode)
    out, counter = torch.full((2, 3), -1.0), torch.arange(4)
    ablation.destroy_arguments([out[:, 1], counter], protected=set())
    assert math.isnan(out[0, 1].item()) and out[0, 0].item() == -1.0 and counter.tolist() == [0, 1, 2, 3]
    ablation.restore()
    assert out.tolist() == [[-1.0] * 3] * 2 and not out.is_inference()
