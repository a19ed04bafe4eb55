"""Shared fixtures. Paths here point at the repository and at ../shared (beside the checkout, as in CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

# The fake OpenAI-compatible server (a real HTTP server on 127.0.0.1) as a fixture for every test file.
pytest_plugins = ["fake_openai"]

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SEED_PROMPT = SHARED / "seed" / "003_a184372c8946f8bb.txt"
NCU_FIXTURES = SHARED / "fixtures" / "ncu"


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def shared() -> Path:
    if not SHARED.exists():
        pytest.skip("../shared is not beside the checkout")
    return SHARED
