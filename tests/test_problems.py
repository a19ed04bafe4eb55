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


# ---------------------------------------------------------------- overrides: every global computed from a size follows

FORMS = '''
import torch

batch_size: int = 16
height = width = 64
D, H, W = 8, 16, 32
out_channels = 24
bias_shape = (out_channels, 1, 1)
hidden = 4 * out_channels
plane = (H, W)
scale = -0.5


class Model(torch.nn.Module):
    pass


def get_inputs():
    return [torch.rand(batch_size, out_channels, height, width)]


def get_init_inputs():
    return []
'''


def test_a_global_computed_from_a_size_follows_its_override(tmp_path):
    """The reference of KernelBench 42 failed at its derived size: bias_shape kept 128 channels when out_channels was
    127, because the override was set after the file had computed bias_shape."""
    path = tmp_path / "forms.py"
    path.write_text(FORMS)
    m = load_module(path, {"out_channels": 7, "H": 5})
    assert (m.out_channels, m.bias_shape, m.hidden) == (7, (7, 1, 1), 28)
    assert (m.D, m.H, m.W, m.plane) == (8, 5, 32, (5, 32))


def test_annotated_chained_and_unpacked_size_globals_are_overridden_one_name_at_a_time(tmp_path):
    path = tmp_path / "forms.py"
    path.write_text(FORMS)
    m = load_module(path, {"batch_size": 3, "width": 9, "W": 11, "scale": 2.0})
    assert (m.batch_size, m.height, m.width, m.D, m.H, m.W, m.scale) == (3, 64, 9, 8, 16, 11, 2.0)
    assert m.get_inputs()[0].shape == (3, 24, 64, 9)
    assert load_module(path).scale == -0.5  # a negative literal is a number too


@pytest.mark.parametrize("source, name, why", [
    (FORMS, "hidden", r"'hidden' is not a size global .*it is `hidden = 4 \* out_channels`; override the sizes it is "
                      r"computed from"),
    (FORMS + "\nheight += 1\n", "height", "'height' is not a size global .*bound 2 times"),
    (FORMS + "\ndef grow():\n    global width\n    width = 128\n", "width",
     "'width' is not a size global .*bound 2 times"),
    (FORMS + "\nif True:\n    depth = 4\n", "depth",
     r"'depth' is not a size global .*bound by if `if True: depth = 4`"),
    (FORMS, "torch", "'torch' is not a size global .*bound by import `import torch`"),
    (FORMS, "bias_shape", r"'bias_shape' is not a size global .*`bias_shape = \(out_channels, 1, 1\)`"),
], ids=["computed", "bound twice", "rebound in a function", "bound in an if", "an import", "a computed tuple"])
def test_overriding_a_name_that_is_not_a_plain_number_assignment_is_a_user_error_saying_why(tmp_path, source, name,
                                                                                             why):
    path = tmp_path / "forms.py"
    path.write_text(source)
    with pytest.raises(UserError, match=why) as e:
        load_module(path, {name: 3})
    assert len(str(e.value).splitlines()) == 1


def test_derived_sizes_resize_only_number_literals_so_computed_globals_follow(tmp_path):
    path = tmp_path / "forms.py"
    path.write_text(FORMS)
    sizes = derive_sizes(load_module(path))
    for s in sizes["sizes"] + sizes["cpu_sizes"]:
        assert "hidden" not in s.overrides and "bias_shape" not in s.overrides
        m = load_module(path, s.overrides)
        assert m.hidden == 4 * m.out_channels and m.bias_shape == (m.out_channels, 1, 1)


MATMUL = '''
import torch


class Model(torch.nn.Module):
    """KernelBench level 1 #2's shape: sizes written as products."""

    def forward(self, a, b):
        return torch.matmul(a, b)


M = 1024 * 2
K = 4096 * 2
N = 2048 * 2
batch_size = 2 ** 4 + 0
steps = -(-100 // 3)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
'''


def test_sizes_written_as_constant_arithmetic_are_size_globals_and_reduced_on_the_cpu(tmp_path):
    """12 of KernelBench's 100 level-1 files write `M = 1024 * 2`: read as no size at all, the CPU ran a 2048x8192 @
    8192x4096 matmul under the interpreter (out of memory, or past the 180 s limit)."""
    from agent.problems.source import SizeSource

    path = tmp_path / "matmul.py"
    path.write_text(MATMUL)
    assert SizeSource(path).sizes == {"M": 2048, "K": 8192, "N": 4096, "batch_size": 16, "steps": 34}
    sizes = {s.label: s.overrides for s in derive_sizes(load_module(path))["cpu_sizes"]}
    assert sizes["cpu"] == {"M": 32, "K": 32, "N": 2, "batch_size": 2}  # N, as n, is read as a batch
    a, b = load_module(path, sizes["cpu"]).get_inputs()
    assert a.shape == (32, 32) and b.shape == (32, 2)
    assert load_module(path).M == 2048  # the file's own value where not overridden


@pytest.mark.parametrize("expr", ["10 ** 10 ** 10", "2 ** 1000", "1 // 0", "8 / 2", "n * 2", "(-8) ** 0.5",
                                  "1e308 * 10", "True + 1", "'a' * 3", "f(2) * 2"])
def test_arithmetic_that_is_not_a_plain_number_is_not_computed_and_not_a_size(tmp_path, expr):
    """Only numbers and + - * // **, evaluated on the tree (never eval()), and none that could not be a size."""
    from agent.problems.source import SizeSource

    path = tmp_path / "odd.py"
    path.write_text(f"n = 4\nx = {expr}\n")
    assert "x" not in SizeSource(path).sizes


HARD_CODED = FORMS.replace("bias_shape = (out_channels, 1, 1)", "bias_shape = (24, 1, 1)")


def test_a_number_written_in_a_tuple_is_the_files_own_and_does_not_follow_a_size(tmp_path):
    """Which 24 of a file is out_channels cannot be known: a literal in a tuple stays what the file says."""
    path = tmp_path / "hard.py"
    path.write_text(HARD_CODED)
    assert load_module(path, {"out_channels": 7}).bias_shape == (24, 1, 1)


# ---------------------------------------------------------------- derived sizes the reference can run at

GROUPED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d -> GroupNorm -> mean"""

    def __init__(self, in_channels, out_channels, num_groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        return self.norm(self.conv(x)).mean(dim=(1, 2, 3))


batch_size = 16
in_channels = 6
out_channels = OUT
height = width = 64
num_groups = GROUPS


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, num_groups]
'''


@pytest.mark.parametrize("out, groups, odd, cpu, cpu_odd", [(24, 8, 24, 8, 8), (48, 3, 45, 6, 3), (96, 12, 84, 12, 12)])
def test_a_group_count_keeps_dividing_the_channels_at_every_derived_size(tmp_path, out, groups, odd, cpu, cpu_odd):
    """An odd quotient where the count is even (24 in 8 groups stays 24: 23 has no 8 groups), an odd size where the
    count is odd (48 in 3 groups: 45)."""
    path = tmp_path / "grouped.py"
    path.write_text(GROUPED.replace("OUT", str(out)).replace("GROUPS", str(groups)))
    p = load_problem(str(path), "cpu")
    sizes = {s.label: s.overrides for s in load_problem(str(path), "cuda").sizes + p.cpu_sizes}
    assert list(sizes) == ["full", "odd", "cpu", "cpu-wide", "cpu-odd"]  # none skipped
    assert (sizes["odd"]["out_channels"], sizes["cpu"]["out_channels"], sizes["cpu-odd"]["out_channels"]) == \
        (odd, cpu, cpu_odd)
    assert sizes["odd"]["height"] == 63 and sizes["cpu-odd"]["height"] == 7  # the plane still gets its tails
    assert sizes["cpu-wide"]["out_channels"] % groups == 0
    assert sizes["cpu-wide"]["out_channels"] == out or sizes["cpu-wide"]["out_channels"] > 64


POOLED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d -> MaxPool2d with a wide window -> global average pool"""

    def __init__(self, in_channels, out_channels, kernel_size, pool_kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.pool = nn.MaxPool2d(pool_kernel_size)

    def forward(self, x):
        return self.pool(self.conv(x)).mean(dim=(2, 3))


batch_size = 4
in_channels = 3
out_channels = 16
height = width = 64
kernel_size = 3
pool_kernel_size = 12


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool_kernel_size]
'''


def _notices(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "skipped" in r.getMessage()]


def test_a_derived_size_the_reference_cannot_run_at_is_skipped_with_a_one_line_notice(tmp_path, caplog):
    """At the cpu sizes the 12-wide pool window is wider than the 6x6 plane the conv leaves: those sets go, the wide
    one (66x66) stays; on the GPU both sets run. Only the device a command runs on is checked and noticed."""
    path = tmp_path / "pooled.py"
    path.write_text(POOLED)
    gpu = load_problem(str(path), "cuda")
    assert [s.label for s in gpu.sizes] == ["full", "odd"] and not _notices(caplog)
    cpu = load_problem(str(path), "cpu")
    assert [s.label for s in cpu.cpu_sizes] == ["cpu-wide"]
    assert _notices(caplog) == [
        "problem pooled: size 'cpu' (batch_size=2, in_channels=3, out_channels=8, height=8, width=8) skipped: its "
        "reference cannot run there: RuntimeError: Given input size: (8x6x6). Calculated output size: (8x0x0). "
        "Output size is too small",
        "problem pooled: size 'cpu-odd' (batch_size=3, in_channels=3, out_channels=7, height=7, width=7) skipped: "
        "its reference cannot run there: RuntimeError: Given input size: (7x5x5). Calculated output size: (7x0x0). "
        "Output size is too small",
    ]
    unchecked = load_problem(str(path))  # a command that runs no reference (render, profile) checks nothing
    assert len(unchecked.cpu_sizes) == 3 and len(_notices(caplog)) == 2


def _hard_coded(tmp_path):
    """A shape written as numbers (bias_shape = (128, 1, 1)): it matches no resized channel count."""
    path = tmp_path / "hard.py"
    path.write_text(HARD_CODED.replace("out_channels = 24", "out_channels = 128").replace("(24, 1, 1)", "(128, 1, 1)")
                    .replace("class Model(torch.nn.Module):\n    pass", "class Model(torch.nn.Module):\n"
                             "    def __init__(self):\n        super().__init__()\n"
                             "        self.bias = torch.nn.Parameter(torch.zeros(bias_shape))\n\n"
                             "    def forward(self, x):\n        return x + self.bias"))
    return path


def test_a_file_whose_reference_runs_at_no_cpu_size_is_a_user_error(tmp_path, caplog):
    with pytest.raises(UserError, match="its reference runs at none of the sizes derived for CPU mode.*write it from "
                                        r"them, e.g. bias_shape = \(out_channels, 1, 1\)"):
        load_problem(str(_hard_coded(tmp_path)), "cpu")
    assert [n.split("'")[1] for n in _notices(caplog)] == ["cpu", "cpu-wide", "cpu-odd"]
    assert all("The size of tensor a" in n and "(128)" in n for n in _notices(caplog))


def test_on_the_gpu_derived_sizes_are_tried_on_the_meta_device_and_the_files_own_always_stay(tmp_path, caplog):
    p = load_problem(str(_hard_coded(tmp_path)), "cuda")
    assert [s.label for s in p.sizes] == ["full"]
    [notice] = _notices(caplog)
    assert notice.startswith("problem hard: size 'odd' (batch_size=15, ") and "length 128" in notice


def test_a_model_that_cannot_run_on_the_meta_device_keeps_its_gpu_sizes_unchecked(tmp_path, caplog):
    """Reading a value (.item()) fails on the meta device at every size, the file's own included: the meta device
    says nothing about such a file. Its CPU sets still run for real."""
    path = tmp_path / "reads.py"
    path.write_text(POOLED.replace("return self.pool(self.conv(x)).mean(dim=(2, 3))",
                                   "y = self.pool(self.conv(x))\n"
                                   "        return y.mean(dim=(2, 3)) * (y.max() > -1e9).item()"))
    assert [s.label for s in load_problem(str(path), "cuda").sizes] == ["full", "odd"] and not _notices(caplog)
    assert [s.label for s in load_problem(str(path), "cpu").cpu_sizes] == ["cpu-wide"] and len(_notices(caplog)) == 2


def test_builtin_problems_are_not_checked_they_list_their_sizes(caplog):
    for name in BUILTIN:
        load_problem(name, "cpu")
    assert not caplog.records


# ---------------------------------------------------------------- a random reference


DROPOUT = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


class Model(nn.Module):
    def __init__(self, c, p):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.drop(self.conv(x)).mean(dim=(2, 3))


batch_size = 4
c = 8
p = P


def get_inputs():
    return [torch.randn(batch_size, c, 30, 30)]


def get_init_inputs():
    return [c, p]
'''

ANSWER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_kernel(x_ptr, out_ptr, HW, SCALE, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(0, HW, BLOCK):
        offs = s + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * HW + offs, mask=offs < HW, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc) / HW * SCALE)


class ModelNew(nn.Module):
    def __init__(self, c, p):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        y = self.conv(x).contiguous()
        n, c, h, w = y.shape
        out = torch.empty(n, c, device=y.device, dtype=y.dtype)
        mean_kernel[(n * c,)](y, out, h * w, SCALE, BLOCK=256)
        return out
'''


@pytest.mark.slow  # two `agent eval` processes
def test_a_random_reference_is_one_line_not_a_tolerance_wide_enough_for_any_answer(tmp_path):
    """Dropout in training mode: eager's error against the fp64 truth is ~0.3, so the tolerance derived from it would
    pass an answer 50 % off. The reference is called twice on the same inputs and refused if it differs; with p=0 the
    same file is a problem like any other, and the off answer is incorrect."""
    import subprocess
    import sys

    def judge(p: str, scale: str) -> subprocess.CompletedProcess:
        problem, answer = tmp_path / f"dropout_{p}.py", tmp_path / f"answer_{scale}.py"
        problem.write_text(DROPOUT.replace("p = P", f"p = {p}"))
        answer.write_text(ANSWER.replace("SCALE, BLOCK=256", f"{scale}, BLOCK=256"))
        return subprocess.run([sys.executable, "-m", "agent", "eval", str(answer), "--problem", str(problem),
                               "--stage", "correctness", "--device", "cpu", "--no-timing", "--json"],
                              capture_output=True, text=True, timeout=600)

    random = judge("0.2", "0.5")
    assert random.returncode == 1 and "Traceback" not in random.stderr, random.stderr[-2000:]
    [line] = [ln for ln in random.stderr.splitlines() if ln.startswith("error:")]
    assert "the problem's Model is not deterministic: two calls on the same inputs differ by" in line
    assert "nn.Dropout: p=0 or self.eval()" in line
    assert judge("0.0", "0.5").returncode != 0  # deterministic now: the off answer is judged, and refused
    assert judge("0.0", "1.0").returncode == 0
