"""agent.harness.static.mainguard: an answer's `if __name__ == "__main__":` blocks, emptied before the static check."""

from __future__ import annotations

import ast

from agent.harness.static.mainguard import skip_main_guards, skip_type_checking


def test_main_guards_are_emptied_and_their_else_branch_kept():
    tree = ast.parse("import torch\nif __name__ == '__main__':\n    import os\nelse:\n    y = 1\n")
    assert skip_main_guards(tree)
    text = ast.unparse(tree)
    assert "os" not in text and "y = 1" in text


def test_code_that_could_rebind_the_module_name_keeps_its_guards():
    for rebind in ("__name__ = '__main__'", "import os as __name__", "def f(__name__): pass"):
        tree = ast.parse(rebind + "\nif '__main__' == __name__:\n    import os\n")
        assert not skip_main_guards(tree)
        assert "os" in ast.unparse(tree).split("\n", 1)[1]


SELF_TEST = """
import torch

def benchmark(model):
    start = torch.cuda.Event(enable_timing=True)
    return timed(model, start)

def timed(model, start):
    return start.elapsed_time(start)

if __name__ == "__main__":
    print(benchmark(None))
"""


def test_helpers_only_the_self_test_calls_are_emptied_with_it():
    tree = ast.parse(SELF_TEST)
    assert skip_main_guards(tree)
    text = ast.unparse(tree)
    assert "Event" not in text and "elapsed_time" not in text  # benchmark, and timed which only it calls
    assert "def benchmark(model):" in text and "def timed(model, start):" in text


def test_a_helper_anything_live_names_keeps_its_body():
    for live in ("class ModelNew:\n    run = benchmark\n",                  # named outside the guard
                 "class M:\n    def forward(self, x):\n        return timed(x, None)\n",  # by code that may run
                 "X = [benchmark]\n",
                 "if __name__ == '__main__':\n    pass\nelse:\n    benchmark(None)\n"):  # the else branch runs
        tree = ast.parse(SELF_TEST + live)
        skip_main_guards(tree)
        assert "elapsed_time" in ast.unparse(tree), live


def test_a_decorated_helper_keeps_its_body():
    tree = ast.parse(SELF_TEST.replace("def timed", "@functools.cache\ndef timed"))  # a decorator may call it
    skip_main_guards(tree)
    assert "elapsed_time" in ast.unparse(tree) and "Event" not in ast.unparse(tree)


def test_a_function_the_guard_does_not_name_is_not_emptied():
    tree = ast.parse("def f(w):\n    w.showwarning = print\n\nif __name__ == '__main__':\n    pass\n")
    skip_main_guards(tree)
    assert "showwarning" in ast.unparse(tree)


PERF_REPORT = """
@triton.testing.perf_report(triton.testing.Benchmark(x_names=["n"], x_vals=[1, 2], args={"t": T}))
def sweep(n, t):
    return triton.testing.do_bench(lambda: n)

if __name__ == "__main__":
    sweep.run(print_data=True)
"""


def test_a_tutorial_perf_report_sweep_is_emptied_and_its_recorders_arguments_kept():
    tree = ast.parse(PERF_REPORT)
    assert skip_main_guards(tree)
    text = ast.unparse(tree)
    assert "do_bench" not in text and "perf_report" not in text and "Benchmark" not in text
    assert "@((['n'], [1, 2], {'t': T}),)" in text  # the arguments stay, to be checked: they run at import


def test_a_perf_report_anything_live_names_keeps_its_decorator_and_body():
    tree = ast.parse(PERF_REPORT + "class M:\n    def forward(self, x):\n        return sweep.run(return_df=True)\n")
    skip_main_guards(tree)
    assert "perf_report" in ast.unparse(tree) and "do_bench" in ast.unparse(tree)


def test_a_dunder_named_function_is_never_a_dead_helper():
    """Python calls a module-level __getattr__ for every name the module lacks (the harness's own lookup of ModelNew
    after `del ModelNew`) and __dir__ for dir(): reached without their names being read."""
    for name in ("__getattr__", "__dir__"):
        tree = ast.parse(SELF_TEST.replace("def benchmark(model)", f"def {name}(model)").replace(
            "print(benchmark(None))", f"print({name}(None))"))
        skip_main_guards(tree)
        assert "Event" in ast.unparse(tree), name


def test_a_helper_named_in_a_string_annotation_keeps_its_body():
    """typing.get_type_hints evaluates `-> "timed(None, None)"`: once the annotation is in the tree as the code it
    spells (policy.check does that first), the helper it calls is live."""
    from agent.harness.worker.annotations import annotations_as_code

    tree = ast.parse(SELF_TEST + "class M:\n    def layout(self) -> 'timed(None, None)':\n        pass\n")
    annotations_as_code(tree)
    skip_main_guards(tree)
    assert "elapsed_time" in ast.unparse(tree)


def test_type_checking_imports_are_emptied_and_their_else_branch_kept():
    for opening in ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:",
                    "import typing\nfrom typing import Any\nif typing.TYPE_CHECKING:",
                    "import typing_extensions as te\nif te.TYPE_CHECKING:"):
        tree = ast.parse(opening + "\n    import numpy as np\nelse:\n    y = 1\n")
        assert skip_type_checking(tree), opening
        text = ast.unparse(tree)
        assert "numpy" not in text and "y = 1" in text


def test_a_type_checking_flag_that_could_be_true_keeps_its_block():
    for opening in ("from typing import TYPE_CHECKING\nTYPE_CHECKING = True",
                    "from typing import TYPE_CHECKING\ndef f(TYPE_CHECKING=1): pass",
                    "from typing import TYPE_CHECKING\nfrom enum import Enum as TYPE_CHECKING",
                    "from enum import TYPE_CHECKING",
                    "TYPE_CHECKING = 1",
                    "import typing\nfrom enum import Enum as typing"):
        test = "typing.TYPE_CHECKING" if "import typing\n" in opening else "TYPE_CHECKING"
        tree = ast.parse(f"{opening}\nif {test}:\n    import os\n")
        assert not skip_type_checking(tree), opening
        assert "import os" in ast.unparse(tree)


def test_a_type_checking_block_inside_a_function_stays_checked():
    tree = ast.parse("from typing import TYPE_CHECKING\ndef g():\n    if TYPE_CHECKING:\n        import os\n")
    assert not skip_type_checking(tree)
