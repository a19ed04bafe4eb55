"""agent.harness.static.owned: private attributes of the candidate's own instances (a nested module's `_launch`) are its own
state, as `self._x` is; a torch object's (`x._version`) stay refused, however the code could make a name hold one."""

from __future__ import annotations

import textwrap

import pytest

from agent.harness.static.policy import check
from agent.schema import StageRules
from tests.test_policy import ABSENT, HEADER

HEAD = """
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self._block = 256

    def _launch(self, y):
        return y
"""


def escapes(extra: str) -> list[str]:
    code = HEADER + textwrap.dedent(HEAD) + textwrap.dedent(extra)
    return [v.message for v in check(code, StageRules(), ABSENT) if v.rule == "escape"]


def test_a_nested_modules_private_helpers_are_its_own():
    assert escapes("""
        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = Head()
                self.head._block = 128

            def forward(self, y):
                local = Head()
                return self.head._launch(local._launch(y))
        """) == []


def test_a_torch_objects_private_attributes_stay_refused():
    assert escapes("""
        def f(x):
            return x._version
        """)


@pytest.mark.parametrize("other_binding", [
    "self.head = torch.zeros(1)",                        # bound to a tensor elsewhere
    "self.register_buffer('head', torch.zeros(1))",      # a buffer under the same name
    "self.register_buffer(name, torch.zeros(1))",        # ... under a computed one
    "self._buffers[name] = torch.zeros(1)",              # nn.Module's tables
    "for self.head in [torch.zeros(1)]: pass",           # a for target
    "other.head = torch.zeros(1)",                       # on any object (self passed around)
    "del self.head",
])
def test_an_attribute_the_code_could_bind_to_anything_else_is_not_own(other_binding):
    assert escapes(f"""
        class Outer(nn.Module):
            def __init__(self, other=None, name='x'):
                super().__init__()
                self.head = Head()
                {other_binding}

            def forward(self, y):
                return self.head._version
        """)


@pytest.mark.parametrize("other_binding", [
    "def f(local): pass",                                # an argument of that name
    "local = torch.zeros(1)",
    "Head = torch.Tensor",                               # the class name rebound
])
def test_a_name_the_code_could_bind_to_anything_else_is_not_own(other_binding):
    assert escapes(f"""
        {other_binding}

        def g(y):
            local = Head()
            return local._version
        """)


def test_a_class_whose_call_makes_something_else_is_not_own():
    assert escapes("""
        class Fake:
            def __new__(cls):
                return torch.zeros(1)

        def g():
            fake = Fake()
            return fake._version
        """)


@pytest.mark.parametrize("body", [
    "head = torch.zeros(1)",                             # a class attribute: self.head finds it first
    "head: torch.Tensor = torch.zeros(1)",
    "head = property(lambda self: torch.zeros(1))",
    "def head(self): return torch.zeros(1)",
])
def test_a_class_attribute_of_that_name_is_not_own(body):
    assert escapes(f"""
        class Outer(nn.Module):
            {body}

            def __init__(self):
                super().__init__()
                self.head = Head()

            def forward(self, y):
                return self.head._version
        """)


def test_an_attribute_nn_module_itself_sets_is_not_own():
    assert escapes("""
        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.training = Head()

            def forward(self, y):
                return self.training._version
        """)


@pytest.mark.parametrize("reader", [
    "def peek(self):\n    return self.head._version",                  # a plain function's parameter named self
    "peek = lambda self: self.head._version",                           # a lambda's
    "class K:\n    @staticmethod\n    def peek(self):\n        return self.head._version",  # a staticmethod's
])
def test_self_head_is_own_only_where_self_is_a_methods_own_first_parameter(reader):
    """`self.head` holds an own instance only on the candidate's own objects: a function whose first parameter is
    merely called self may be handed any object with a `head` (a torch module bound without an attribute store)."""
    found = escapes("""
        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = Head()
        """ + "\n" + reader + "\n")
    assert any("_version" in m for m in found), found
