"""Problems: the registry, loading by name or path, resizing by size globals, derived sizes for foreign files."""

from __future__ import annotations

import time

import pytest

from agent.errors import UserError
from agent.problems import (
    derive_sizes,
    list_problems,
    load_module,
    load_problem,
    starting_code,
)

BUILTIN = ["gap44", "conv2d_gap_bias_lse", "gap_large", "conv3d_gap"]

FOREIGN = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A foreign problem: Conv2d then a mean."""

    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride)

    def forward(self, x):
        return self.conv(x).mean(dim=(2, 3))


batch_size = 128
in_channels = 3
out_channels = 64
height = 224
width = 224
kernel_size = 7
stride = 2
num_heads = 8


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride]
'''


def test_builtin_problems_are_listed_in_registry_order():
    assert [p.name for p in list_problems()] == BUILTIN


def test_gap44_has_the_seeds_sizes_and_starting_kernel(shared):
    p = load_problem("gap44")
    m = load_module(p.path)
    assert (m.batch_size, m.in_channels, m.out_channels, m.height, m.width) == (16, 64, 128, 128, 128)
    assert (m.kernel_size, m.stride, m.padding, m.output_padding, m.multiplier) == (3, 2, 1, 1, 0.5)
    seed = (shared / "seed" / "003_a184372c8946f8bb.txt").read_text()
    assert "[CURRENT CODE]\n```python\n" + starting_code(p) + "```\n" in seed


@pytest.mark.parametrize("name", BUILTIN)
def test_every_problem_has_gpu_and_cpu_sizes_full_and_odd(name):
    p = load_problem(name)
    assert [s.label for s in p.sizes] == ["full", "odd"]
    assert [s.label for s in p.cpu_sizes] == ["cpu", "cpu-wide", "cpu-odd"]
    assert p.path.is_file() and (p.start is None or p.start.is_file()) and p.description


@pytest.mark.parametrize("name", BUILTIN)
def test_cpu_wide_reaches_past_one_tile_and_64_channels(name):
    """The reduced plane (the pooled tensor's spatial part) is over 4096 elements at cpu-wide, and its channels over
    64 wherever the problem itself has more: a one-tile kernel or a 64-channel grid is wrong there."""
    import torch

    p = load_problem(name)

    def pooled_input(overrides):
        m = load_module(p.path, overrides)
        torch.manual_seed(0)
        model = m.Model(*m.get_init_inputs())
        inputs, seen = m.get_inputs(), []
        for mod in list(model.modules())[1:]:  # the layers' outputs (a conv's is what gets pooled)
            mod.register_forward_hook(lambda _m, _i, out: seen.append(out))
        with torch.no_grad():
            model(*inputs)
        pooled = [t for t in seen if isinstance(t, torch.Tensor) and t.dim() >= 4] or list(inputs)
        return max(pooled, key=lambda t: t.numel())

    wide = pooled_input(next(s for s in p.cpu_sizes if s.label == "cpu-wide").overrides)
    assert wide[0, 0].numel() > 4096
    full_channels = load_module(p.path).__dict__
    most = max(v for k, v in full_channels.items() if "channel" in k and isinstance(v, int))
    assert wide.shape[1] > 64 or most <= 64


@pytest.mark.parametrize("name", BUILTIN)
def test_size_overrides_change_the_input_shapes(name):
    p = load_problem(name)
    shapes = []
    for s in p.cpu_sizes + p.sizes[1:]:  # not "full": gap_large's full input alone is 400 MB
        m = load_module(p.path, s.overrides)
        for key, value in s.overrides.items():
            assert getattr(m, key) == value
        [x] = m.get_inputs()
        assert x.shape[0] == s.overrides["batch_size"]
        assert x.shape[-2:] == (s.overrides["height"], s.overrides["width"])
        shapes.append(tuple(x.shape))
    assert len(set(shapes)) == len(shapes)


@pytest.mark.parametrize("name", BUILTIN)
def test_the_reference_runs_at_cpu_sizes_quickly(name):
    p = load_problem(name)
    for s in p.cpu_sizes:
        m = load_module(p.path, s.overrides)
        start = time.perf_counter()
        out = m.Model(*m.get_init_inputs())(*m.get_inputs())
        assert out.shape[0] == m.batch_size
        assert time.perf_counter() - start < 1.0


def test_odd_sizes_are_not_powers_of_two():
    for p in list_problems():
        for s in (p.sizes[1], p.cpu_sizes[1]):
            assert any(v & (v - 1) for v in s.overrides.values()), (p.name, s.label)


def test_modules_are_fresh_each_time():
    p = load_problem("gap44")
    a = load_module(p.path, {"height": 13})
    b = load_module(p.path)
    assert (a.height, b.height) == (13, 128)


def test_an_unknown_size_global_is_a_user_error():
    with pytest.raises(UserError, match="no size global 'heigth'"):
        load_module(load_problem("gap44").path, {"heigth": 3})


def test_unknown_problem_names_the_choices():
    with pytest.raises(UserError, match=r"unknown problem 'gap45'; choose from: gap44, .*PATH.py"):
        load_problem("gap45")


def test_a_missing_problem_file(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_problem(str(tmp_path / "nope.py"))


def test_a_file_without_the_kernelbench_api_is_rejected(tmp_path):
    path = tmp_path / "half.py"
    path.write_text("class Model: pass\n")
    with pytest.raises(UserError, match="no get_inputs"):
        load_problem(str(path))


def test_a_foreign_file_gets_derived_sizes_that_keep_layer_hyperparameters(tmp_path):
    path = tmp_path / "foreign.py"
    path.write_text(FOREIGN)
    p = load_problem(str(path))
    assert (p.name, p.start, p.description) == ("foreign", None, "A foreign problem: Conv2d then a mean.")
    sizes = {s.label: s.overrides for s in p.sizes + p.cpu_sizes}
    assert sizes["full"] == {}
    assert sizes["odd"] == {"batch_size": 127, "in_channels": 3, "out_channels": 63, "height": 223, "width": 223}
    assert sizes["cpu"] == {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 28, "width": 28}
    assert sizes["cpu-odd"] == {"batch_size": 3, "in_channels": 3, "out_channels": 7, "height": 27, "width": 27}
    for label in ("cpu", "cpu-odd"):
        m = load_module(path, sizes[label])
        assert m.Model(*m.get_init_inputs())(*m.get_inputs()).shape == (m.batch_size, m.out_channels)


def test_a_file_with_no_size_globals_is_validated_at_its_own_sizes(tmp_path):
    path = tmp_path / "fixed.py"
    path.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n"
                    "def get_inputs():\n    return [torch.rand(4, 4)]\ndef get_init_inputs():\n    return []\n")
    sizes = derive_sizes(load_module(path))
    assert [s.overrides for s in sizes["sizes"] + sizes["cpu_sizes"]] == [{}, {}]
