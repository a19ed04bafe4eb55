"""The offline proposer's tail after the pool (agent/offline/tail.py, recognise's reading of it): a reduction over the
channels of the pooled N x C values (logsumexp, sum, mean, amax, max, ...) and the per-row ops after it are read
into a typed Plan.rowwise and written as a second Triton kernel; anything else after the pool is declined with its
reason, never left to PyTorch. CPU mode (TRITON_INTERPRET=1), fp64 truth."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported: kernels run on CPU tensors

import torch  # noqa: E402

from agent.catalog import find_gpu  # noqa: E402
from agent.offline import ANCHORS, OfflineProposer, Unsupported, Variant, recognise, render  # noqa: E402
from agent.problems import load_module, load_problem  # noqa: E402
from agent.protocols import ProposalContext  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
H100 = find_gpu("h100")
_count = itertools.count()

MODEL = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1))
        self.row_bias = nn.Parameter(torch.randn(out_channels))
        self.offset = nn.Parameter(torch.randn(1))
        self.scale = 2.5

    def forward(self, x):
        x = self.conv(x)
        x = torch.mean(x, dim=(2, 3), keepdim=True) + self.bias
{body}
        return x


batch_size = 4
in_channels = 3
out_channels = 10  # not a power of two: the tail kernel's masked lanes count
height = width = 9


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
'''


def problem(tmp_path: Path, *body: str):
    """A conv -> mean -> + bias problem whose forward goes on with `body` (lines, x in, x out)."""
    path = tmp_path / f"tail_{next(_count)}.py"
    path.write_text(MODEL.format(body="\n".join(f"        {line}" for line in body)))
    return load_problem(str(path))


def relative_error(code: str, problem, tmp_path: Path) -> float:
    """max |ModelNew - Model(fp64)| / max |Model(fp64)| on signed inputs, the reference's weights."""
    path = tmp_path / f"cand_{next(_count)}.py"
    path.write_text(code)  # Triton reads a kernel's source from its file
    spec = importlib.util.spec_from_file_location(path.stem, path)
    cand = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cand)
    m = load_module(problem.path, problem.cpu_sizes[0].overrides if problem.cpu_sizes else None)
    torch.manual_seed(0)
    ref = m.Model(*m.get_init_inputs())
    new = cand.ModelNew(*m.get_init_inputs())
    new.load_state_dict(ref.state_dict())
    torch.manual_seed(1)
    x = m.get_inputs()[0] * 2 - 0.5
    with torch.no_grad():
        truth, out = ref.double()(x.double()), new(x)
    assert out.shape == truth.shape and out.dtype == x.dtype
    return ((out.double() - truth).abs().max() / truth.abs().max()).item()


def ops_of(plan) -> list[tuple[str, str | None]]:
    return [(op.name, None if op.operand is None else plan.operands[op.operand].expr) for op in plan.rowwise.ops]


# ---------------------------------------------------------------- reading the tail


def test_the_logsumexp_over_the_channels_is_a_typed_tail_after_the_bias():
    plan = recognise(load_problem("conv2d_gap_bias_lse"))
    assert [op.name for op in plan.post] == ["add"]  # + bias: per channel, still in the pooling kernel's epilogue
    assert plan.rowwise is not None and plan.rowwise.reduce == "logsumexp" and plan.rowwise.ops == []
    assert plan.rowwise.out_ones == 3 and plan.out_ones == 2  # returns (N, 1, 1, 1) from the pooled (N, C, 1, 1)
    assert plan.tail == []  # no PyTorch statement at all


def test_kb42s_sum_over_size_one_dims_is_a_shape_change_and_its_times_ten_a_per_row_op():
    plan = recognise(load_problem("kb_42_convt2d_gap_bias_lse_sum_mul"))
    assert plan.rowwise is not None and plan.rowwise.reduce == "logsumexp"
    assert ops_of(plan) == [("mul", "10.0")] and plan.rowwise.out_ones == 1  # (N, 1)
    assert plan.tail == [] and plan.algebraic  # the closed form still applies below the tail


@pytest.mark.parametrize("body,reduce,ops,out_ones,views", [
    (["x = x.sum(dim=1)"], "sum", [], 2, []),  # keepdim False
    (["x = torch.mean(x, dim=(1, 2, 3))"], "mean", [], 0, []),  # the channels and the size-1 dims at once
    (["x = torch.amax(x, dim=1) * self.scale"], "amax", [("mul", "self.scale")], 2, []),
    (["x = torch.max(x, dim=1, keepdim=True).values", "x = torch.tanh(x - self.offset)"], "max",
     [("sub", "self.offset"), ("tanh", None)], 3, []),
    (["x = x.min(1)[0]", "x = 1.0 / torch.sigmoid(x)"], "min", [("sigmoid", None), ("rdiv", "1.0")], 2, []),
    (["x = torch.log(torch.exp(x).sum(dim=1))"], "sum", [("log", None)], 2, []),  # exp: per channel, before it
    (["x = torch.logsumexp(x, dim=1)", "x = torch.sum(x, dim=(1, 2)) * 10.0"], "logsumexp", [("mul", "10.0")], 0,
     []),
    (["x = torch.logsumexp(x, dim=1, keepdim=True).flatten(1)"], "logsumexp", [], 3, ["x = x.flatten(1)"]),
])
def test_reductions_over_the_channels_and_the_per_row_ops_after_them_are_read(tmp_path, body, reduce, ops, out_ones,
                                                                              views):
    prob = problem(tmp_path, *body)
    plan = recognise(prob)
    assert plan.rowwise is not None and plan.rowwise.reduce == reduce
    assert ops_of(plan) == ops and plan.rowwise.out_ones == out_ones and plan.tail == views
    code = render(plan, Variant(family="row", **ANCHORS["row"]), H100)
    assert "rows_tail_kernel[(N,)]" in code and "torch.logsumexp" not in code and "torch.max" not in code
    assert relative_error(code, prob, tmp_path) < 1e-5


@pytest.mark.parametrize("body,reason", [
    (["x = torch.softmax(x, dim=1)"], "softmax after the pool: not an op the offline proposer can write in Triton"),
    (["x = torch.logsumexp(x, dim=1) + self.row_bias"],
     "add broadcasts the value reduced over the channels to (4, 1, 10)"),  # a per-channel operand after it
    (["x = torch.logsumexp(x, dim=0)"], "logsumexp over the batch dim after the pool"),
    (["x = torch.sum(x)"], "sum over every dim after the pool (the batch dim too)"),
    (["values, index = torch.max(x, dim=1)", "x = values + index"], "the indices of max over the channels are used"),
    (["x = x.flatten(1)", "x = torch.logsumexp(x, dim=1)"],
     "logsumexp after x.flatten(1): only views may follow a reshape of the pooled value"),
])
def test_what_the_tail_cannot_write_is_declined_with_its_reason(tmp_path, body, reason):
    prob = problem(tmp_path, *body)
    with pytest.raises(Unsupported) as e:
        recognise(prob)
    assert str(e.value) == reason
    p = OfflineProposer(prob, H100)
    assert p.propose(ProposalContext(prompt="p", k=2, stage="memory-fusion")).answers == []
    assert p._unsupported is not None and p._unsupported.endswith(reason)


# ---------------------------------------------------------------- the kernels


@pytest.mark.parametrize("name", ["conv2d_gap_bias_lse", "kb_42_convt2d_gap_bias_lse_sum_mul"])
def test_every_family_with_the_tail_matches_the_reference_at_every_cpu_size(name, tmp_path):
    prob = load_problem(name, "cpu")
    plan = recognise(prob)
    families = ["row", "split", "persistent"] + ["algebraic"] * plan.algebraic
    for family in families:
        code = render(plan, Variant(family=family, **ANCHORS[family]), H100)
        assert code.index("def rows_tail_kernel") < code.index("class ModelNew")
        for size in prob.cpu_sizes:
            sized = prob.model_copy(update={"cpu_sizes": [size]})
            assert relative_error(code, sized, tmp_path) < 1e-5, (family, size.label)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # the interpreter's log(0) of the -inf row
def test_the_logsumexp_tail_subtracts_the_max_and_keeps_infinities(tmp_path):
    """Rows whose exp overflows fp32 (1e4), a row of -inf and one holding +inf: torch.logsumexp's answers."""
    plan = recognise(load_problem("conv2d_gap_bias_lse"))
    path = tmp_path / "lse.py"
    path.write_text(render(plan, Variant(family="row", **ANCHORS["row"]), H100))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    cand = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cand)
    inf = float("inf")
    y = torch.tensor([[1e4, 1e4 - 1, -3.0], [-inf, -inf, -inf], [inf, 1.0, 2.0], [0.5, 0.25, -1.0]])
    out = cand.rows_tail(y.view(4, 3, 1, 1))
    assert out.shape == (4, 1, 1, 1)
    assert torch.equal(out.flatten().isinf(), torch.tensor([False, True, True, False]))
    assert torch.allclose(out.flatten(), torch.logsumexp(y.double(), dim=1).float(), rtol=1e-6)


@pytest.mark.slow  # the real harness, through the CLI
def test_agent_run_reaches_a_correct_best_on_conv2d_gap_bias_lse(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENT_"))}
    env.update({"NO_COLOR": "1", "XDG_CONFIG_HOME": str(REPO / "tests" / "data" / "no-config")})
    p = subprocess.run([sys.executable, "-m", "agent", "run", "--problem", "conv2d_gap_bias_lse", "--stage", "auto",
                        "--llm", "offline", "--device", "cpu", "--iterations", "1", "--samples", "2", "--root",
                        str(tmp_path), "--json"], capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    candidates = [e for e in lines if e.get("event") == "candidate"]
    assert [c["verdict"] for c in candidates] == ["correct", "correct"], [c.get("message") for c in candidates]
    assert lines[-1]["best"] in {c["candidate"] for c in candidates}
