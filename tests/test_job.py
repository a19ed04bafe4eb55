"""agent.harness.job: what a worker is handed."""

from __future__ import annotations

import importlib.util

import pytest

from agent.harness.job import prepare_job
from agent.problems import load_problem


def test_the_candidates_file_is_decoded_as_the_text_that_was_checked(tmp_path):
    """Written as UTF-8 with its byte-order mark, the file cannot be decoded by another coding declaration: the
    interpreter refuses one (under utf-7 a comment's `+AAo-` would have been a new line of code)."""
    hidden = "# -*- coding: utf-7 -*-\nx = 1\n# +AAo-x = 2\n"
    prepare_job(tmp_path, "evaluate", load_problem("gap44"), code=hidden, device="cpu", seed=0, publish=False)
    spec = importlib.util.spec_from_file_location("candidate_probe", tmp_path / "candidate.py")
    assert spec is not None and spec.loader is not None
    with pytest.raises(SyntaxError, match="encoding problem"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
