"""tests/fake_openai.py as a script, the way the GPU checks use it: on a machine without pytest it must still serve."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# Runs the script as `python tests/fake_openai.py ...` would, with pytest made unimportable (a bare GPU image).
WITHOUT_PYTEST = ("import runpy, sys; sys.modules['pytest'] = None; sys.argv = sys.argv[1:]; "
                  "runpy.run_path(sys.argv[0], run_name='__main__')")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_fake_server_runs_standalone_without_pytest_and_serves_the_answers_given(tmp_path):
    """Before: `import pytest` at the top of the script, so it failed at once where pytest is not installed."""
    answer = tmp_path / "answer.md"
    answer.write_text("```python\nclass ModelNew: ...\n```\n")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", WITHOUT_PYTEST, str(TESTS / "fake_openai.py"), "--port", str(port),
                             str(answer)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed once it listens; empty if the script died
        if proc.poll() is not None:
            assert proc.stderr is not None
            pytest.fail(f"the script exited {proc.returncode}: {proc.stderr.read().strip().splitlines()[-1:]}")
        assert f"fake OpenAI server at http://127.0.0.1:{port}/v1" in first, first
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", method="POST",
                                         data=json.dumps({"model": "m", "n": 2, "messages": []}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = json.load(response)
        assert [c["message"]["content"] for c in body["choices"]] == [answer.read_text()] * 2
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as response:
            assert json.load(response)["object"] == "list"  # the agent's preflight gets an answer too
    finally:
        proc.terminate()
        proc.wait(timeout=10)
