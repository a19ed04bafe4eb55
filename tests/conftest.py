"""Shared fixtures. Paths here point at the repository and at ../shared (beside the checkout, as in CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

# The fake OpenAI-compatible server (a real HTTP server on 127.0.0.1) as a fixture for every test file.
# tiers: the quick tier (--quick) and the record of durations it reads.
pytest_plugins = ["fake_openai", "tiers"]

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SEED_PROMPT = SHARED / "seed" / "003_a184372c8946f8bb.txt"
NCU_FIXTURES = SHARED / "fixtures" / "ncu"


# The longest files first (measured on the 2-core machine): with `-n 2 --dist loadfile` a file runs whole in one
# process, so one that starts last is the suite's tail (15.8 min instead of 11.5 in two runs of the same commit).
LONGEST_FIRST = ["test_harness.py", "test_install_modes.py", "test_kernelbench.py", "test_cli_run.py", "test_cli_progress.py", "test_scale.py",
                 "test_offline_remedies.py", "test_rules_operands.py", "test_inductor.py", "test_cli_search.py",
                 "test_containment.py", "test_report.py", "test_store.py", "test_cli_config.py", "test_offline_tail.py"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--quick's selection (tests/tiers.py); the longest files first (the same order in every xdist process); `gpu`
    tests need CUDA: skipped, with the reason shown, where there is none (this machine, CI)."""
    from tiers import quick_deselect

    left_out = quick_deselect(config, items)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        dropped = {id(i) for i in left_out}
        items[:] = [i for i in items if id(i) not in dropped]
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda i: (rank.get(i.path.name, len(rank)), order[id(i)]))
    gpu_items = [i for i in items if i.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on one: python -m pytest -m gpu -q tests/test_gpu.py)")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def shared() -> Path:
    if not SHARED.exists():
        pytest.skip("../shared is not beside the checkout")
    return SHARED
