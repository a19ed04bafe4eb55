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
    errors, _ = eager_errors(model, inputs, out32, truth, seed=1)
    assert errors[0] > 1.0  # no correct digit: the noise the candidate cannot be blamed for
    assert errors[1] < 1e-6  # the well-conditioned output keeps its own, tight base


def test_a_well_conditioned_output_keeps_a_tight_base():
    model = torch.nn.Linear(64, 8).eval()
    inputs = [torch.randn(32, 64)]
    with torch.no_grad():
        truth = [model.double()(inputs[0].double()).float().double()]
        model.float()
        out32 = [model(inputs[0])]
    assert SHAKES >= 2 and eager_errors(model, inputs, out32, truth, seed=0)[0][0] < 1e-5


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


# ---------------------------------------------------------------- a constant factor under a wide tolerance


def _judged(answer: torch.Tensor, truth: torch.Tensor, eager_error: float, eager_scale: float | None,
            precision: str = "fp32") -> tuple[bool, str]:
    """compare() on one trial of `truth` whose eager fp32 had `eager_error` (its worst element) and `eager_scale`
    (its constant factor; None: a reference recorded before factors were)."""
    from agent.harness.job import TrialRecord
    from agent.harness.judge.validate import Reference, compare

    record = {"id": 0, "size": "full", "distribution": "randn", "buffer": "fresh", "input_shapes": [[4]],
              "input_digests": ["d"], "output_shapes": [list(truth.shape)], "output_dtypes": ["float32"]}
    scales = [] if eager_scale is None else [eager_scale]
    ref = Reference(trials=[TrialRecord(**record, eager_errors=[eager_error], eager_scales=scales)], truths=[[truth]])
    c = compare(ref, [TrialRecord(**record)], [[answer.float()]], [], precision=precision)
    return c.passed, c.message


def _gap_like(seed: int = 0) -> torch.Tensor:
    """A (128, 16) GAP output: per-channel means of mixed sign."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(128, 16, generator=g, dtype=torch.float64) * 0.3 + torch.linspace(-1, 1, 16).double())


def test_scale_fit_is_the_constant_factor_and_noise_has_almost_none():
    from agent.harness.judge.validate import scale_fit

    def scale_error(o, t):
        return scale_fit(o, t)[0]

    truth = _gap_like()
    assert abs(scale_error(truth * (1 - 1 / 4357), truth) + 1 / 4357) < 1e-12
    noise = torch.randn(truth.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    noisy = truth + noise * 2e-4 * truth.abs().max() / 3  # zero-mean rounding noise, worst element ~2e-4
    assert abs(scale_error(noisy, truth)) < 2e-5
    assert scale_error(torch.zeros(3), torch.zeros(3, dtype=torch.float64)) == 0.0


def test_a_wrong_divisor_hidden_under_a_tf32_wide_tolerance_is_refused_and_tf32_noise_is_not():
    """gap44 on a GPU: eager's TF32 conv is off by 2.1e-4 at worst, so the tolerance is 8.6e-4; dividing by H*W + 1
    (4357) is off by 2.3e-4 everywhere, under it element by element (was: correct on a GPU)."""
    truth = _gap_like()
    passed, message = _judged(truth * (1 - 1 / 4357), truth, eager_error=2.14e-4, eager_scale=1.5e-5)
    assert not passed and "[constant-factor]" in message and "truth times 0.99977" in message
    assert "relative error" not in message and "TF32" not in message  # neither the worst-element words nor tl.dot's hint
    # noise of the same worst size, above and below: an honest TF32 answer
    noise = torch.randn(truth.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    noisy = truth + noise * 2.3e-4 * truth.abs().max() / 3.5
    assert _judged(noisy, truth, eager_error=2.14e-4, eager_scale=1.5e-5)[0]
    # a factor eager's own numerics reach passes: the test is held to eager's factor (x4), as the error is to eager's
    assert _judged(truth * (1 - 1 / 4357), truth, eager_error=2.14e-4, eager_scale=1e-4)[0]


def test_a_factor_within_the_fp32_floor_passes_and_one_element_is_the_worst_element_test_alone():
    truth = _gap_like()
    assert _judged(truth * (1 + 5e-5), truth, eager_error=1e-7, eager_scale=1e-8)[0]  # the floor, 1e-4
    scalar = torch.tensor([3.0], dtype=torch.float64)
    assert _judged(scalar * (1 + 2e-4), scalar, eager_error=1e-4, eager_scale=1e-9)[0]  # within 4e-4: no factor test
    # a cached reference from before factors were recorded: nothing to hold the factor to
    assert _judged(truth * (1 - 1 / 4357), truth, eager_error=2.14e-4, eager_scale=None)[0]
    # --precision tf32 holds the factor to TF32's floor (2e-3), kernelbench to its element-wise test only
    assert _judged(truth * (1 - 1 / 4357), truth, eager_error=2.14e-4, eager_scale=1.5e-5, precision="tf32")[0]
    assert _judged(truth * (1 - 1 / 4357), truth, eager_error=2.14e-4, eager_scale=1.5e-5,
                   precision="kernelbench")[0]


def test_eager_records_its_own_factor_beside_its_worst_error():
    model = torch.nn.Linear(64, 8).eval()
    inputs = [torch.randn(32, 64)]
    with torch.no_grad():
        truth = [model.double()(inputs[0].double())]
        model.float()
        out32 = [model(inputs[0])]
    errors, scales = eager_errors(model, inputs, out32, truth, seed=0)
    assert len(scales) == 1 and 0.0 <= scales[0] < errors[0] < 1e-5


def test_a_few_outputs_with_honest_tf32_noise_are_not_read_as_a_factor_but_many_with_a_real_one_are():
    """Sixteen outputs, each off by TF32-sized noise: their least-squares factor is as large as the noise itself and
    may beat eager's lucky one; it is not a constant, it does not stand out of their own scatter."""
    from agent.harness.judge.validate import scale_fit

    g = torch.Generator().manual_seed(9)
    truth = torch.rand(16, generator=g, dtype=torch.float64) + 0.5
    noisy = truth * (1 + torch.randn(16, generator=g, dtype=torch.float64) * 3e-4)
    off, noise = scale_fit(noisy, truth)
    assert abs(off) > 1.1e-4 and abs(off) < 4 * noise  # beyond the factor's tolerance, within its own scatter
    assert _judged(noisy, truth, eager_error=3e-4, eager_scale=2e-5)[0]
    # the same noise on 2048 outputs leaves a factor far below it; a real one of 2.3e-4 stands out
    big = _gap_like(7)
    scatter = 1 + torch.randn(big.shape, generator=g, dtype=torch.float64) * 1e-4
    assert _judged(big * scatter, big, eager_error=3e-4, eager_scale=2e-5)[0]
    assert not _judged(big * scatter * (1 - 1 / 4357), big, eager_error=3e-4, eager_scale=2e-5)[0]


def test_a_tf32_sized_error_without_tl_dot_is_explained_on_a_gpu_by_pytorchs_own_layers():
    """KernelBench #67 on an H200: a channels-last conv left in PyTorch took cuDNN's TF32 algorithm (1.33e-4 where
    eager's NCHW conv is 1.7e-7). No tl.dot to blame: on a GPU the hint names PyTorch's layers; in CPU mode none."""
    from agent.harness.job import TrialRecord
    from agent.harness.judge.validate import Reference, compare

    truth = _gap_like()
    record = {"id": 0, "size": "full", "distribution": "randn", "buffer": "fresh", "input_shapes": [[4]],
              "input_digests": ["d"], "output_shapes": [list(truth.shape)], "output_dtypes": ["float32"]}
    ref = Reference(trials=[TrialRecord(**record, eager_errors=[1.7e-7], eager_scales=[1e-8])], truths=[[truth]])
    noise = torch.randn(truth.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    answer = (truth + noise * 1.3e-4 * truth.abs().max() / 3).float()
    on_gpu = compare(ref, [TrialRecord(**record)], [[answer]], [], tf32_dot=False, on_gpu=True)
    assert not on_gpu.passed and "cuDNN picks its algorithm by layout" in on_gpu.message
    cpu = compare(ref, [TrialRecord(**record)], [[answer]], [], tf32_dot=False, on_gpu=False)
    assert not cpu.passed and "TF32" not in cpu.message
    dot = compare(ref, [TrialRecord(**record)], [[answer]], [], tf32_dot=True, on_gpu=True)
    assert "tl.dot rounds its inputs" in dot.message and "cuDNN" not in dot.message
