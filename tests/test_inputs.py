"""agent.harness.worker.inputs: the trials' inputs, drawn the same way in both workers."""

from __future__ import annotations

import torch

from agent.harness.worker.inputs import make_inputs, module_weights
from agent.problems import load_problem


def problem_module():
    import importlib.util

    path = load_problem("gap44").path
    spec = importlib.util.spec_from_file_location("problem_gap44", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_same_seed_draws_the_same_inputs():
    module = problem_module()
    for dist in ("problem", "randn", "offset"):
        a, b = make_inputs(module, dist, 1234, "cpu"), make_inputs(module, dist, 1234, "cpu")
        assert torch.equal(a[0], b[0]), dist


def test_the_global_generator_forgets_the_inputs_seed():
    """A forward that read torch.initial_seed() could draw its inputs again, a copy no operator derived from them."""
    module = problem_module()
    x = make_inputs(module, "problem", 1234, "cpu")[0]
    assert torch.initial_seed() != 1234
    torch.manual_seed(torch.initial_seed())
    assert not torch.equal(torch.rand(x.shape), x)


def test_module_weights_are_read_from_the_instances_without_running_the_candidates_code():
    """The tracker's weights (what a traced call keeps as it begins): parameters and buffers of every submodule,
    shared ones once, without calling the candidate's parameters() or named_modules()."""

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))
            self.register_buffer("b", torch.zeros(2))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = Head()
            self.again = self.head
            self.scale = torch.nn.Parameter(torch.ones(1))

        def parameters(self, recurse=True):
            raise RuntimeError("the candidate's parameters() ran")

        def named_modules(self, *args, **kwargs):
            raise RuntimeError("the candidate's named_modules() ran")

    assert sorted(t.numel() for t in module_weights(Net(), torch)) == [1, 2, 3]


def test_a_tensor_with_attributes_of_its_own_is_not_plain():
    """Its namespace shadows its class's methods: the harness reading `out.detach()` or `x.untyped_storage()` after
    the forward would call the candidate's function, unrecorded, in the calls it reads (the checked ones)."""
    import pytest

    from agent.harness.worker.inputs import NotPlain, flatten, own_attributes

    out, x = torch.zeros(2), torch.ones(3)
    assert flatten(out) == ("tensor", [out])
    own_attributes("input", [x, 3])
    out.detach = lambda: torch.ones(2)
    assert flatten(out) == ("not a plain tensor: Tensor with attributes of its own", [])
    assert flatten((x, out))[1] == []
    with pytest.raises(NotPlain, match=r"output 1 holds attributes of its own \(detach\)"):
        own_attributes("output", [x, out])


def test_matching_weights_are_copied_unless_modelnew_derived_them_from_its_own_draw():
    """Same-seed weights drawn in another order are replaced by the Model's; a weight the init folded a constant
    into (div_, .data *= s, a shifted bias) is kept (copying it back judged an honest fold incorrect)."""
    from agent.harness.worker.inputs import copy_matching_weights

    torch.manual_seed(0)
    ref = torch.nn.Conv2d(3, 4, 3)
    state = {k: v.detach().clone() for k, v in ref.state_dict().items()}

    torch.manual_seed(1)  # another draw: replaced
    other = torch.nn.Conv2d(3, 4, 3)
    copy_matching_weights(state, other)
    assert torch.equal(other.weight, state["weight"]) and torch.equal(other.bias, state["bias"])

    torch.manual_seed(0)
    folded = torch.nn.Conv2d(3, 4, 3)
    with torch.no_grad():
        folded.weight.div_(2.0)
    folded.bias.data += 0.25
    copy_matching_weights(state, folded)
    assert torch.allclose(folded.weight, state["weight"] / 2.0) and torch.allclose(folded.bias, state["bias"] + 0.25)

    torch.manual_seed(0)
    zeroed = torch.nn.Conv2d(3, 4, 3)
    with torch.no_grad():
        zeroed.weight.zero_()  # no correlation to speak of: the Model's weight, as before
    copy_matching_weights(state, zeroed)
    assert torch.equal(zeroed.weight, state["weight"])


def test_the_other_distributions_keep_the_problems_structural_zeros():
    """KernelBench's triangular matmuls draw torch.triu(randn): a redraw of the whole matrix broke what the problem
    promises, and two honest answers that skip the zero half were called wrong on every redrawn trial. An input the
    problem draws all zero is redrawn (nothing in it is structure to keep)."""
    import types

    module = types.SimpleNamespace(get_inputs=lambda: [torch.triu(torch.randn(8, 8)), torch.zeros(4),
                                                       torch.randn(4)])
    for dist in ("randn", "offset", "randn*100"):
        upper, zeros, plain = make_inputs(module, dist, 7, "cpu")
        assert torch.equal(upper, torch.triu(upper)), dist
        assert bool((upper[torch.ones(8, 8).triu().bool()] != 0).all()), dist  # the upper half redrawn
        assert bool((zeros != 0).all()) and bool((plain != 0).all()), dist
