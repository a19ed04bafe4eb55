"""The base of each output's tolerance: eager fp32's error against the fp64 truth, taken as its rounding noise (the
drawn inputs and ulp-shaken copies of them), not one draw's luck."""

from __future__ import annotations

import torch

from agent.harness.judge.validate import SHAKES, eager_errors, rel_error, shaken


class Cancels(torch.nn.Module):
    """Numerically zero: the same sum taken in two orders (KernelBench #23's group-norm mean has the same shape)."""

    def forward(self, x):
        return (x.sum() - x.flip(0).cumsum(0)[-1]).reshape(1), x * 2.0


def truth_and_fp32(model, inputs):
    with torch.no_grad():
        truth = [t.double() for t in model(*[x.double() for x in inputs])]
        return truth, list(model(*inputs))


def test_shaken_moves_every_float_by_one_ulp_either_way_and_leaves_integers_alone():
    x, n = torch.randn(4096), torch.arange(5)
    a, m = shaken([x, n], seed=3)
    up, down = torch.nextafter(x, torch.tensor(torch.inf)), torch.nextafter(x, torch.tensor(-torch.inf))
    assert torch.equal(m, n) and bool(((a == up) | (a == down)).all())
    assert 0.4 < float((a == up).float().mean()) < 0.6
    assert torch.equal(shaken([x, n], seed=3)[0], a) and not torch.equal(shaken([x, n], seed=4)[0], a)


def test_a_numerically_zero_output_gets_eagers_rounding_noise_even_where_its_own_draw_is_exact():
    k = torch.randint(-4096, 4096, (20000,), generator=torch.Generator().manual_seed(0))
    model, inputs = Cancels(), [k.float() / 1024]  # multiples of 2^-10 whose partial sums stay exact in any order
    truth, out32 = truth_and_fp32(model, inputs)
    assert rel_error(out32[0], truth[0]) == 0.0  # the lucky draw: eager exact, an honest answer in another order isn't
    errors = eager_errors(model, inputs, out32, truth, seed=1)
    assert errors[0] > 1.0  # no correct digit: the noise the candidate cannot be blamed for
    assert errors[1] < 1e-6  # the well-conditioned output keeps its own, tight base


def test_a_well_conditioned_output_keeps_a_tight_base():
    model = torch.nn.Linear(64, 8).eval()
    inputs = [torch.randn(32, 64)]
    with torch.no_grad():
        truth = [model.double()(inputs[0].double()).float().double()]
        model.float()
        out32 = [model(inputs[0])]
    assert SHAKES >= 2 and eager_errors(model, inputs, out32, truth, seed=0)[0] < 1e-5


# ---------------------------------------------------------------- references with NaN and Inf in them


def test_where_the_truth_is_nan_only_nan_is_right_and_the_error_is_never_nan():
    """KLDivLoss of a log of a negative: the truth is NaN. The error was NaN, and `NaN > tolerance` is False, so any
    output passed; now the truth's NaN must come back as NaN, and the rest is measured as before."""
    truth = torch.tensor([float("nan"), 2.0, -4.0], dtype=torch.float64)
    assert rel_error(torch.tensor([float("nan"), 2.0, -4.0]), truth) == 0.0
    assert abs(rel_error(torch.tensor([float("nan"), 2.0, -4.004]), truth) - 0.004 / 4.0) < 1e-7
    assert rel_error(torch.tensor([1.0, 2.0, -4.0]), truth) == float("inf")  # a number where the truth is NaN
    assert rel_error(torch.tensor([float("nan")]), torch.tensor([float("nan")], dtype=torch.float64)) == 0.0


def test_a_truth_beyond_fp32s_range_is_fp32s_infinity_and_a_finite_one_is_not():
    """cumprod on inputs of mean 5: the fp64 truth reaches 1e40 where every fp32 answer, eager's too, is inf."""
    from agent.harness.judge.validate import representable, worst_index

    truth = torch.tensor([1e40, -1e40, 3.0, float("inf")], dtype=torch.float64)
    assert torch.equal(representable(truth, torch.float32), torch.tensor([torch.inf, -torch.inf, 3.0, torch.inf],
                                                                         dtype=torch.float64))
    assert torch.equal(representable(truth, torch.float64), truth)
    assert rel_error(torch.tensor([torch.inf, -torch.inf, 3.0, torch.inf]), truth) == 0.0
    assert rel_error(torch.tensor([torch.inf, torch.inf, 3.0, torch.inf]), truth) == float("inf")  # wrong sign
    assert rel_error(torch.tensor([1.0, 2.0, torch.inf]), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)) == \
        float("inf")
    assert worst_index(torch.tensor([torch.inf, torch.inf, 3.0, torch.inf]), truth) == (1,)
    assert worst_index(torch.tensor([1.0, 2.5, 3.0]), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)) == (1,)


def test_an_infinite_eager_error_gives_the_floor_never_an_infinite_tolerance():
    """Eager fp32 overflowing where the truth does not has no error to scale by: max(floor, 4 x inf) passed anything."""
    from agent.harness.settings import settings, tolerance

    floor = settings().validation.tolerance_floor
    assert tolerance(float("inf")) == tolerance(float("nan")) == floor
    assert tolerance(float("inf"), "tf32") == settings().validation.tf32_tolerance_floor


def test_a_trial_record_with_an_infinite_eager_error_survives_its_json():
    """It was written as null, which its schema refused: "the reference ... failed: exit status 0"."""
    from agent.harness.job import TrialRecord, WorkerResult

    res = WorkerResult(mode="reference", trials=[TrialRecord(id=0, size="cpu", distribution="offset", buffer="fresh",
                                                             eager_error=float("inf"),
                                                             eager_errors=[float("inf"), float("nan"), 1e-7])])
    back = WorkerResult.model_validate_json(res.model_dump_json())
    assert back.trials[0].eager_error == float("inf") and back.trials[0].eager_errors[0] == float("inf")
    assert back.trials[0].eager_errors[1] != back.trials[0].eager_errors[1] and back.trials[0].eager_errors[2] == 1e-7


def test_an_infinity_in_the_truth_no_longer_scales_every_other_error_to_zero():
    """max |truth| was inf, so 4.0 where 1.0 was right came out as a relative error of 0."""
    truth = torch.tensor([float("inf"), 1.0], dtype=torch.float64)
    assert rel_error(torch.tensor([float("inf"), 5.0]), truth) == 4.0
    assert rel_error(torch.tensor([float("inf"), 1.0]), truth) == 0.0


def _one_trial(model_kind: str, answer_kind: str, n: int) -> tuple[bool, str]:
    """compare() on one trial whose values are exact: only the returned structure can fail it."""
    from agent.harness.job import TrialRecord
    from agent.harness.judge.validate import Reference, compare

    truth = [torch.arange(4.0, dtype=torch.float64) + k for k in range(n)]
    record = {"id": 0, "size": "cpu", "distribution": "randn", "buffer": "fresh", "input_shapes": [[4]],
              "input_digests": ["d"], "output_shapes": [[4]] * n, "output_dtypes": ["float32"] * n}
    ref = Reference(trials=[TrialRecord(**record, output_kind=model_kind, eager_errors=[1e-7] * n)], truths=[truth])
    mine = TrialRecord(**record, output_kind=answer_kind)
    c = compare(ref, [mine], [[t.float() for t in truth]], [])
    return c.passed, c.message


def test_the_returned_structure_is_compared_before_the_values():
    """A 1-tuple holding the right tensor is not a tensor (`model(x) * 2` fails on it); a list unpacks as a tuple
    does."""
    passed, message = _one_trial("tensor", "tuple[1]", 1)  # before: correct
    assert not passed and "forward returned a tuple of 1 tensor, the Model returns a tensor" in message
    passed, message = _one_trial("tuple[1]", "tensor", 1)
    assert not passed and "forward returned a tensor, the Model returns a tuple of 1 tensor" in message
    assert not _one_trial("tensor", "list[1]", 1)[0]
    assert _one_trial("tuple[2]", "tuple[2]", 2)[0] and _one_trial("tuple[2]", "list[2]", 2)[0]
    assert _one_trial("tensor", "tensor", 1)[0]
