"""agent.harness.judge.saturation: where a problem's truth sits at a bound on every drawn input, inputs drawn small enough
to move it; none where no scale does."""

from __future__ import annotations

from pathlib import Path

import torch

from agent.harness.worker.inputs import make_inputs, scale_of
from agent.harness.judge.saturation import scales
from agent.harness.worker.saturation import varies
from agent.problems import load_module, load_problem

CANDIDATES = Path(__file__).parent / "candidates"
DRAWN = ["problem", "randn", "offset"]


def test_a_truth_varies_when_its_range_is_wide_and_its_elements_are_not_all_at_its_ends():
    assert varies([torch.linspace(-1, 1, 64, dtype=torch.float64)])
    assert not varies([torch.tensor([1.0, 1.0 - 1e-9])])  # one level: tanh at 1 (a range under FLAT)
    saturated = torch.where(torch.randn(64) > 0, 1.0, -1.0).double() * (1 - 1e-12)
    assert not varies([saturated])  # two levels: tanh at -1 and 1, a clamp at 0 and 1
    assert varies([torch.tensor([0.5, 1.0])]) and not varies([torch.zeros(4)])  # few elements: the range alone
    assert not varies([torch.linspace(0, 1, 64), torch.ones(16)])  # every output must vary
    assert varies([torch.tensor([3.0])]) is None  # a scalar cannot


def test_randn_times_s_is_the_randn_draw_scaled():
    module = load_module(CANDIDATES / "problems" / "seq_energy_tanh.py", {"batch_size": 2, "seq_len": 8, "hidden": 4})
    [a], [b] = make_inputs(module, "randn", 7, "cpu"), make_inputs(module, "randn*0.01", 7, "cpu")
    assert torch.equal(b, a * 0.01)
    assert scale_of("randn*1e-3") == 1e-3 and scale_of("randn") is None and scale_of("offset*2") is None


def test_a_saturating_problem_gets_a_small_scale_at_every_size_where_each_draw_is_flat():
    """tanh(sum of squares over the rows): 1.0 on every draw at every CPU size (before: 7 trials that a sum of 32
    rows of 4,096 passed)."""
    problem = load_problem(str(CANDIDATES / "problems" / "seq_energy_tanh.py"), "cpu")
    found = scales(problem, problem.cpu_sizes, DRAWN)
    assert [i for i, _ in found] == [0, 1, 2]
    wide = dict(found)[1]  # cpu-wide: 4,096 rows, the sum needs the smaller scale to stay in tanh's range
    assert wide == "randn*0.01"


def test_no_trial_where_the_truth_varies_or_no_scale_moves_it(tmp_path):
    gap44 = load_problem("gap44", "cpu")
    assert scales(gap44, gap44.cpu_sizes, DRAWN) == []
    path = tmp_path / "softmax_total.py"  # a softmax's total: 1 whatever the input, at any scale
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                    "        return torch.softmax(x, dim=1).sum(dim=1)\n\n\nbatch_size = 4\nfeatures = 64\n\n\n"
                    "def get_inputs():\n    return [torch.randn(batch_size, features)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    problem = load_problem(str(path), "cpu")
    assert scales(problem, problem.cpu_sizes, DRAWN) == []


def test_the_worker_finds_what_the_parent_finds(tmp_path):
    """A GPU's sizes are probed in a sandboxed worker (mode `saturation`): run here in CPU mode, it draws the same
    inputs and finds the same sizes and scales as the parent's own probe; a problem whose truth varies gets none."""
    from agent.harness.shared import varied_in_worker

    problem = load_problem(str(CANDIDATES / "problems" / "seq_energy_tanh.py"), "cpu")
    assert varied_in_worker(problem, problem.cpu_sizes, DRAWN, "cpu", []) == scales(problem, problem.cpu_sizes, DRAWN)
    gap44 = load_problem("gap44", "cpu")
    assert varied_in_worker(gap44, gap44.cpu_sizes[:1], DRAWN, "cpu", []) == []


def test_a_gpu_evaluation_asks_for_the_probe_at_its_own_sizes_and_keeps_it_on_disk(tmp_path, monkeypatch):
    """Before: CPU mode only, and on an H200 the answer summing 32 of 4,096 rows was judged correct on all 7 trials.
    The GPU's probe runs once per problem and sizes, then comes from the cache directory."""
    import agent.harness.shared as shared_mod

    calls = []

    def probe(problem, sizes, distributions, device, hide, gpu_lock=None):
        calls.append((problem.name, device, len(sizes)))
        return [(0, "randn*0.01")]

    monkeypatch.setattr(shared_mod, "varied_in_worker", probe)
    problem = load_problem(str(CANDIDATES / "problems" / "seq_energy_tanh.py"), "cuda")
    first = shared_mod.Shared().varied(problem, problem.sizes, DRAWN, "cuda", [], None, tmp_path)
    again = shared_mod.Shared().varied(problem, problem.sizes, DRAWN, "cuda", [], None, tmp_path)
    assert first == again == [(0, "randn*0.01")] and calls == [(problem.name, "cuda", len(problem.sizes))]
