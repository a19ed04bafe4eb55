"""agent.harness.static.policy: the APIs honest answers use past torch and triton.language (Hopper TMA descriptors,
logging, torch.testing, __slots__), each admitted with the fence that keeps it from computing, timing or escaping."""

from __future__ import annotations

import textwrap

import pytest

from tests.test_policy import rules_of


def test_tma_descriptors_host_and_device_are_allowed():
    assert rules_of("""
        from triton.tools.tensor_descriptor import TensorDescriptor
        import triton.tools.tensor_descriptor as td
        d = TensorDescriptor.from_tensor(torch.zeros(4, 4), [4, 4])
        e = td.TensorDescriptor(torch.zeros(4, 4), [4, 4], [4, 1], [4, 4])
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8))
    """) == set()


@pytest.mark.parametrize("code", [
    "import triton.tools.disasm",
    "from triton.tools import compile",
    "triton.tools.tensor_descriptor.validate_block_shape([4])",
    "triton.runtime.driver.active.launcher_cls",
])
def test_the_rest_of_triton_tools_and_runtime_stays_refused(code):
    assert rules_of(code) & {"import", "escape"}


def test_a_logger_and_its_levels_are_allowed():
    assert rules_of("""
        import logging
        log: logging.Logger = logging.getLogger(__name__)
        log.setLevel(logging.DEBUG)
        log.debug("x %s", 1)
        logging.getLogger("a").exception("failed")
    """) == set()


@pytest.mark.parametrize("code, rule", [
    ("logging.basicConfig(filename='log.txt')", "escape"),        # writes a file
    ("logging.FileHandler('log.txt')", "escape"),
    ("from logging import Formatter", "escape"),                  # %(created)f: a clock
    ("logging.makeLogRecord({})", "escape"),
    ("logging.time.time()", "escape"),                            # the module time, through logging
    ("logging.disable(50)", "escape"),
    ("import logging.handlers", "import"),
    ("logging.getLogger().addHandler(h)", "clock"),               # a handler is handed every record
    ("logging.getLogger().findCaller(stack_info=True)", "escape"),  # the forward's callers, file and line
    ("logging.getLogger().manager.loggerDict", "escape"),         # every logger, the harness's included
    ("logging.getLogger().addFilter(print)", "clock"),
    ("getattr(logging.getLogger(), 'addHandler')", "clock"),
    ("r.created", "clock"),                                       # a record's timestamps, whatever reached it
    ("r.relativeCreated", "clock"),
    ("'{0.msecs}'.format(r)", "clock"),
    ("'{r.args.created}'.format(r=r)", "clock"),
])
def test_what_a_logger_offers_past_logging_stays_refused(code, rule):
    assert rule in rules_of("import logging\n" + code)


def test_names_honest_code_gives_its_own_things_are_not_a_loggers():
    """`filters` and `handlers` are refused only as a logger's ways in (adding one): conv filters stay fine."""
    assert rules_of("class M:\n    def __init__(self):\n        self.filters = torch.zeros(8, 3, 3, 3)\n"
                    "        self.handlers = {}\n") == set()


def test_a_format_string_without_forbidden_attributes_is_fine():
    assert rules_of("s = '{0.shape} {1:.3f} {}'.format(torch.zeros(1), 1.0, 2)") == set()


def test_torch_testing_is_allowed_but_not_its_private_modules():
    assert rules_of("torch.testing.assert_close(torch.zeros(1), torch.zeros(1))") == set()
    assert "escape" in rules_of("torch.testing._internal")


def test_slots_in_a_class_body_are_allowed():
    assert rules_of(textwrap.dedent("""
        class Cfg:
            __slots__ = ("block", "warps")
    """)) == set()


def test_the_tutorials_driver_import_is_allowed_and_nothing_else_of_triton_runtime():
    assert rules_of("""
        from triton.runtime import driver
        DEVICE = driver.active.get_active_torch_device()
        sms = driver.active.utils.get_device_properties(DEVICE.index)["multiprocessor_count"]
    """) == set()
    for code in ("from triton.runtime import jit", "from triton.runtime import driver\ndriver.set_active(None)",
                 "from triton.runtime import driver\ndriver.active.launcher_cls", "from triton.runtime.jit import JITFunction"):
        assert rules_of(code) & {"escape", "import"}, code


def test_contextlib_guards_and_torch_version_are_allowed():
    assert rules_of("""
        import contextlib
        from contextlib import contextmanager, nullcontext
        from torch.nn.parameter import Parameter
        hip = torch.version.hip is not None
        with contextlib.nullcontext():
            pass
    """) == set()


@pytest.mark.parametrize("code", ["import contextlib\ncontextlib.chdir('/')", "from contextlib import redirect_stdout",
                                  "import contextlib\ncontextlib.os.getcwd()", "import contextlib\ncontextlib.sys"])
def test_the_rest_of_contextlib_stays_refused(code):
    assert rules_of(code) & {"escape", "import"}


# ---------------------------------------------------------------- triton.set_allocator: code run inside a launch

ALLOC = "from typing import Optional\n"


@pytest.mark.parametrize("code", [
    "def alloc_fn(size: int, alignment: int, stream: Optional[int]):\n    \"\"\"workspace\"\"\"\n"
    "    return torch.empty(size, device='cuda', dtype=torch.int8)\ntriton.set_allocator(alloc_fn)",
    "triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device='cuda'))",
    "triton.set_allocator(allocator=lambda n, a, s: torch.empty(n + a, dtype=torch.int8))",
])
def test_an_allocator_that_only_allocates_is_allowed(code):
    assert rules_of(ALLOC + code) == set()


@pytest.mark.parametrize("code", [
    # computes where the tracer records nothing (inside the launch), its writes credited to the kernel
    "def alloc_fn(size, alignment, stream):\n    OUT[0].copy_(X[0].mean(dim=(2, 3)))\n"
    "    return torch.empty(size, dtype=torch.int8)\ntriton.set_allocator(alloc_fn)",
    "triton.set_allocator(lambda size, align, stream: torch.empty(X.pop().sum().int(), dtype=torch.int8))",
    "triton.set_allocator(lambda size, align, stream: torch.zeros(size) if X else torch.empty(size))",
    "def f(s, a, t):\n    return torch.empty(s)\ndef f(s, a, t):\n    return OUT[0].copy_(X[0].mean())\n"
    "triton.set_allocator(f)",                                      # which f runs cannot be read
    "sa = triton.set_allocator\nsa(lambda s, a, t: torch.empty(s))",  # passed around
    "getattr(triton, 'set_allocator')(lambda s, a, t: torch.empty(s))",
    "triton.set_allocator(HOOKS[0])",
])
def test_an_allocator_that_does_anything_else_or_cannot_be_read_is_refused(code):
    assert "escape" in rules_of(ALLOC + code)


def test_os_may_read_tritons_settings_by_literal_name():
    assert rules_of("""
        import os
        from os import environ, getenv
        INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1" or os.getenv("TRITON_INTERPRET") == "1"
        DEBUG = "TRITON_DEBUG" in os.environ and os.environ["TRITON_DEBUG"] != "0"
        CACHE = "TRITON_CACHE_DIR" not in environ or getenv("TRITON_CACHE_DIR")
    """) == set()


@pytest.mark.parametrize("code", [
    'K = os.environ.get("OPENAI_API_KEY")',         # a secret
    'K = os.getenv("HOME")',
    'K = os.environ["OPENAI_API_KEY"]',
    'K = "HOME" in os.environ',
    'n = "TRITON_X"\nK = os.environ.get(n)',        # a computed name
    'K = os.environ.get(f"TRITON_{1}")',
    'K = os.environ.get(key="TRITON_X")',
    'K = os.environ.get("TRITON_X", open("f").read())',
    'K = dict(os.environ)',                          # the environment passed around, copied or iterated
    'e = os.environ\nK = e["OPENAI_API_KEY"]',
    'K = list(os.environ.items())',
    'K = getattr(os, "environ")',
    'def f(m):\n    return m.environ\nK = f(os)',
    'os.environ["TRITON_INTERPRET"] = "1"',          # written
    'os.environ.setdefault("TRITON_X", "1")',
    'del os.environ["TRITON_X"]',
    'os.system("ls")',                               # the rest of os
    'os.path.exists("x")',
    'os = torch',
])
def test_every_other_use_of_os_stays_refused(code):
    assert "import" in rules_of("import os\n" + code)


@pytest.mark.parametrize("code", ["import os.path", "from os import system", "from os import environ, system",
                                  "K = torch.os.environ.get('TRITON_X')"])
def test_os_imports_past_environ_stay_refused(code):
    assert "import" in rules_of(code)


def test_torchscript_compile_and_autocast_markers_are_allowed():
    assert rules_of("""
        from torch.jit import ignore
        @torch.jit.ignore
        def check(x):
            return x
        @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
        def fwd(ctx, x):
            return x
        @torch.cuda.amp.custom_bwd
        def bwd(ctx, g):
            return g
        eager = not torch.jit.is_scripting() and not torch.compiler.is_compiling()
        with torch.amp.autocast("cuda", enabled=False):
            pass
    """) == set()


@pytest.mark.parametrize("code", [
    "f = torch.jit.script(lambda x: x)",             # TorchScript compiles PyTorch: an answer of pure PyTorch
    "from torch.jit import script",
    "torch.jit.fork(print, 1)",                      # work on another thread
    "torch.jit.load('m.pt')",
    "jit = torch.jit",                               # the module as a value: the list could be passed by
    "f = torch.compiler.disable(print)",             # imports dynamo, which replaces torch.manual_seed
    "torch.compiler.set_stance('force_eager')",
    "torch.amp.GradScaler()",
    "import torch.jit as j\nk = j",                  # imported, then the module as a value
])
def test_the_rest_of_those_modules_stays_refused(code):
    assert "import" in rules_of(code)


def test_a_modules_own_version_and_author_globals_are_allowed():
    assert rules_of("__version__ = '0.2.0'\n__author__ = 'me'\nclass M:\n    __constants__ = ['scale']\n") == set()
    assert "escape" in rules_of("L = __loader__\n")


def test_a_perf_report_sweeps_arguments_stay_checked():
    """The recorders stand for their arguments, which run at import: a clock there is still a clock."""
    assert "clock" in rules_of("""
        @triton.testing.perf_report(triton.testing.Benchmark(x_names=["n"], x_vals=[1], args={"e": torch.cuda.Event()}))
        def sweep(n, e):
            pass
        if __name__ == "__main__":
            sweep.run()
    """)
