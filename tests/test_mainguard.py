"""agent.harness.mainguard: an answer's `if __name__ == "__main__":` blocks, emptied before the static check."""

from __future__ import annotations

import ast

from agent.harness.mainguard import skip_main_guards


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
