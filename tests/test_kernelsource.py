"""agent.harness.worker.kernelsource: the text Triton compiles is the text each kernel was made from. Run in a fresh
interpreter without TRITON_INTERPRET (the GPU's JITFunction, which parses its `_src`; no GPU is needed to parse)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(body: str, where: Path) -> dict:
    """Runs `body` as a file (Triton reads a kernel's source from its file)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = where / "kernels.py"
    script.write_text(textwrap.dedent(body))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=REPO,
                       timeout=120, env={**env, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_kernel_is_compiled_from_the_text_it_was_made_from_and_a_replaced_one_is_reported(tmp_path: Path):
    """functools.update_wrapper copies a namespace into the kernel object (a setattr by names no check reads): its
    `_src`, which the GPU's compiler parses, could hold code the static check never read."""
    got = run('''
        import ast, dataclasses, functools, json
        import triton, triton.language as tl
        from agent.harness.worker.kernelsource import Sources

        sources = Sources()
        sources.install()

        @triton.jit
        def honest(x, n, B: tl.constexpr):
            o = tl.arange(0, B)
            tl.store(x + o, tl.load(x + o, mask=o < n), mask=o < n)

        untouched = [ast.unparse(honest.parse()), sources.swapped[:]]
        Patch = dataclasses.make_dataclass("Patch", [("_" + "src", str), ("hash", object)])
        functools.update_wrapper(honest, Patch("def honest(x, n, B):\\n    pass\\n", None), assigned=())
        functools.update_wrapper(tl.cdiv, Patch("def cdiv(x, div):\\n    return x\\n", None), assigned=())
        print(json.dumps({"before": untouched, "after": ast.unparse(honest.parse()), "cdiv": ast.unparse(tl.cdiv.parse()),
                          "swapped": sources.swapped}))
    ''', tmp_path)
    assert got["before"][1] == [] and "tl.store" in got["before"][0]
    assert got["after"] == got["before"][0]  # the text it was made from, not the replacement
    assert "return x" not in got["cdiv"] and "//" in got["cdiv"]
    assert len(got["swapped"]) == 2 and "kernel `__main__.honest`'s source" in got["swapped"][0]
    assert "cdiv" in got["swapped"][1]
