"""agent.harness.worker.trusted's guard: what the audit hook refuses from candidate code at run time. Each case runs in a
fresh interpreter (an audit hook cannot be removed)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RUN = """
import importlib.util, json, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
from agent.harness.worker.trusted import guard
refused = []
guard(sys.argv[1], refused.append)
spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])
module = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(module)
    error = None
except Exception as e:
    error = type(e).__name__
print(json.dumps({"refused": refused, "error": error, "registered": sorted(
    k.__name__ for k in getattr(module, "pick").registry if k is not object) if hasattr(module, "pick") else []}))
"""


def guarded_import(tmp_path: Path, code: str) -> dict:
    path = tmp_path / "candidate.py"
    path.write_text(textwrap.dedent(code))
    out = subprocess.run([sys.executable, "-c", RUN, str(path)], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("hint", ['typing.Optional["math.floor"]', 'list["math.floor"]', 'typing.Union["math.floor", int]'])
def test_a_string_typing_evaluates_that_is_no_annotation_is_refused(tmp_path, hint):
    """functools.singledispatch's register evaluates a function's annotations, and typing a forward reference nested
    in one: a string that reached typing outside any annotation (a module-level alias) is code no static check read."""
    result = guarded_import(tmp_path, f"""
        import functools, math, typing
        Hint = {hint}
        @functools.singledispatch
        def pick(x):
            return None
        def _probe(x: Hint):
            return x
        pick.register(_probe)
    """)
    assert result["error"] == "RuntimeError"
    assert result["refused"] and "math.floor" in result["refused"][0]


def test_annotations_typing_evaluates_stay_allowed(tmp_path):
    """The strings of annotations were checked as the code they spell: evaluating them is fine, written as strings
    or kept as strings by `from __future__ import annotations`."""
    result = guarded_import(tmp_path, """
        from __future__ import annotations
        import functools
        @functools.singledispatch
        def pick(x) -> "int":
            return None
        @pick.register
        def _(x: float) -> int:
            return 1
        @pick.register
        def _(x: "tuple") -> int:
            return 2
        @pick.register
        def _(x: "'list'") -> int:
            return 3
    """)
    assert result == {"refused": [], "error": None, "registered": ["float", "list", "tuple"]}


def test_a_librarys_own_annotations_evaluated_for_the_candidate_stay_allowed(tmp_path):
    """A string evaluated in a library module's namespace is the library's annotation, not the candidate's code."""
    (tmp_path / "helperlib.py").write_text("def f(x: 'float') -> 'float':\n    return x\n")
    result = guarded_import(tmp_path, """
        import functools
        import helperlib
        @functools.singledispatch
        def pick(x):
            return None
        pick.register(helperlib.f)
    """)
    assert result == {"refused": [], "error": None, "registered": ["float"]}


def test_with_the_collector_off_finalizers_run_only_where_the_harness_collects():
    """A cycle's finalizer runs wherever a collection starts: in a traced call mostly inside the recorder's dispatch,
    where its mode is off (a candidate's __del__ took the mean there, unrecorded). With the collector off, the
    harness's calls see none; `collect` (between calls) runs them."""
    import gc

    from agent.harness.worker.trusted import Trusted

    fired: list[int] = []

    class Later:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            fired.append(1)

    trusted = Trusted("cpu")
    with trusted.collector_off():
        for _ in range(5000):  # far past the youngest generation's threshold (700)
            Later()
        assert fired == []
        trusted.collect()
        assert len(fired) == 5000
    assert gc.isenabled()


def test_numeric_flags_read_a_flag_pytorch_cannot_report_as_its_error_not_as_a_failure():
    # the legacy TF32 getters raise once the newer fp32_precision settings say otherwise: a candidate setting those
    # must change what the harness reads, not crash its reading
    code = ("import torch\nfrom agent.harness.worker.trusted import numeric_flags\nbefore = numeric_flags()\n"
            "torch.backends.fp32_precision = 'tf32'\nafter = numeric_flags()\n"
            "print(sorted(k for k in before if after.get(k) != before[k]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "matmul.allow_tf32" in r.stdout
