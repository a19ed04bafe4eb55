"""agent.harness.worker.workerio: what the worker's modes share; here, the cap on what a candidate prints."""

from __future__ import annotations

import io
import sys

from agent.harness.worker.workerio import CANDIDATE_OUTPUT_CHARS, capped_output


def test_the_candidates_stdout_and_stderr_share_one_cap_then_a_note_and_are_restored(monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with capped_output():
        print("a" * (CANDIDATE_OUTPUT_CHARS - 10))
        print("b" * 100, file=sys.stderr)  # crosses the cap: its first 9 characters pass, then the note
        print("c" * 100)
        assert sys.stdout.encoding == "utf-8" and sys.stdout is not out
    assert sys.stdout is out and sys.stderr is err
    assert out.getvalue() == "a" * (CANDIDATE_OUTPUT_CHARS - 10) + "\n"
    assert err.getvalue().startswith("b" * 9 + "\n[the candidate's output past") and "cc" not in err.getvalue() + out.getvalue()
