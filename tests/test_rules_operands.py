"""Memory-fusion's operands of a heavy layer (agent.harness.judge.rules), judged by the real harness in CPU mode on gap44:
a Triton kernel may copy the convolution's input and weight to channels-last (torch.compile's layout change, a
buffer over the intermediate limit at the cpu-odd size), and every way of hiding an intermediate behind that
allowance is refused. The candidates are entries of tests/candidates/manifest.toml (the whole adversarial suite runs
them too); this runs only them."""

from __future__ import annotations

import pytest

from agent.harness import evaluate_many
from agent.schema import EvalResult

from test_harness import MANIFEST, answer, request

CASES = ["legit_triton_layout_copies", "operand_read_back", "operand_laundered_by_clone", "operand_extra_conv",
         "operand_zero_weight_conv", "operand_two_convs"]


@pytest.fixture(scope="module")
def verdicts() -> dict[str, EvalResult]:
    return dict(zip(CASES, evaluate_many([request(answer(MANIFEST[name]), timeout_s=300) for name in CASES])))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", CASES)
def test_each_operand_case_gets_its_verdict(verdicts, name):
    case, result = MANIFEST[name], verdicts[name]
    assert result.verdict == case["verdict"], f"{name} ({case['threat']}): {result.verdict}: {result.message}"
    assert case.get("message", "") in result.message


@pytest.mark.slow
def test_the_legitimate_copy_passes_by_the_allowance_not_by_being_small(verdicts):
    """The same copy, read back by a Triton kernel after the convolution, is refused naming its size: 8.4 KB, over
    the 5.9 KB the stage allows (cpu-odd: 1/8 of the 48 KB conv output); only a round trip of more than that is."""
    refused = verdicts["operand_read_back"].message
    assert "reads the 8.4 KB that kernel `to_channels_last_kernel` wrote" in refused
    assert verdicts["legit_triton_layout_copies"].verdict == "correct"
