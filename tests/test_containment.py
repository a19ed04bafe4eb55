"""The candidate harness as a whole against hostile answers: `agent run` (the real CLI, CPU mode) against the fake
OpenAI server serving answers that cheat, forge, escape and leak, with a secret in the agent's environment. None may
rank correct, and no file of the run may hold the secret, although one answer prints it in its own error message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, reply

REPO = Path(__file__).resolve().parent.parent
CANDIDATES = Path(__file__).resolve().parent / "candidates"
SECRET = "sk-agent-e2e-7d1c9b3a5f2e4d6c8b0a9e8d"
HOSTILE = ["forge_patch_through_type.py", "kernel_copies_a_pytorch_result.py", "roundtrip_two_kernels.py",
           "escape_torch_os.py", "memo_same_pointer.py"]


def _echoes_the_secret() -> str:
    code = (CANDIDATES / "correct.py").read_text()
    return "```python\n" + code.replace("    def forward(self, x):\n",
                                        f"    def forward(self, x):\n        raise RuntimeError('key: {SECRET}')\n") + "```\n"


@pytest.mark.slow
def test_hostile_answers_rank_nowhere_and_the_run_keeps_no_secret(tmp_path):
    answers = ["```python\n" + (CANDIDATES / f).read_text() + "```\n" for f in HOSTILE] + [_echoes_the_secret()]
    server = FakeOpenAI().start()
    try:
        server.script([reply(*answers)])
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env.update({"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": SECRET, "COLUMNS": "200", "NO_COLOR": "1"})
        r = subprocess.run([sys.executable, "-m", "agent", "run", "--device", "cpu", "--gpu", "4090", "--llm", "openai",
                            "--iterations", "1", "--samples", str(len(answers)), "--root", str(tmp_path), "--json"],
                           capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    finally:
        server.stop()
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    verdicts = [e["verdict"] for e in events if e.get("event") == "candidate" and e["iteration"] == 1]
    assert len(verdicts) == len(answers) and "correct" not in verdicts, verdicts
    assert SECRET not in r.stdout + r.stderr
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []
    echoed = next(p for p in tmp_path.rglob("result.json") if "key: " in p.read_text())
    assert "key: [redacted]" in echoed.read_text()
