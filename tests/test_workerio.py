"""agent.harness.worker.workerio: what the worker's modes share; here, the cap on what a candidate prints."""

from __future__ import annotations

import io
import sys

from agent.harness.worker.workerio import CANDIDATE_OUTPUT_CHARS, capped_output, describe_error


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


def _job(tmp_path):
    from agent.harness.job import WorkerJob

    return WorkerJob.model_construct(candidate_path=tmp_path / "candidate.py")


def test_a_triton_compile_error_names_the_kernels_line_and_the_reason_not_only_the_source_excerpt(tmp_path):
    # Triton's text is the excerpt (up to 12 lines), a caret, then the reason: the first lines alone lose the reason
    import ast

    from triton.compiler.errors import CompilationError

    src = "\n".join(["def gap(x_ptr, out_ptr, HW, BLOCK: tl.constexpr):", "    row = tl.program_id(0)",
                     "    a = 1", "    b = 2", "    c = 3", '    tl.device_assert(HW > 0, "empty plane")'])
    node = ast.parse(src).body[0].body[4]
    try:
        try:
            raise ValueError("condition must be a tensor, got constexpr[True]")
        except ValueError as cause:
            raise CompilationError(src, node, None) from cause
    except CompilationError as e:
        err = describe_error(e, "run", _job(tmp_path))
    assert err.kind == "compile_error"
    assert err.message.startswith("CompilationError at kernel line 6:4 `tl.device_assert(HW > 0, \"empty plane\")`: ")
    assert err.message.endswith("ValueError: condition must be a tensor, got constexpr[True]")

    with_reason = CompilationError(src, node, "AssertionError('Loop-carried variable acc has initial type fp32')")
    assert describe_error(with_reason, "run", _job(tmp_path)).message.endswith(
        "AssertionError('Loop-carried variable acc has initial type fp32')")


def test_other_errors_keep_their_first_lines(tmp_path):
    err = describe_error(RuntimeError("first\nsecond\n\nthird\nfourth\nfifth"), "run", _job(tmp_path))
    assert err.kind == "runtime_error" and err.message == "RuntimeError: first | second | third | fourth"


def test_an_exception_posing_as_a_compile_error_whose_attributes_raise_still_gets_its_message(tmp_path):
    class CompilationError(Exception):
        @property
        def node(self):
            raise RuntimeError("boom")

    err = describe_error(CompilationError("at 1:0: | x"), "run", _job(tmp_path))
    assert err.message == "CompilationError: at 1:0: | x"
