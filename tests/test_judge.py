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
