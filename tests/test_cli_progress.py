"""What `agent run` shows while it runs, through the real CLI on the CPU against the fake OpenAI server: phases and
elapsed time, each candidate as its verdict lands (not when the round ends), a log's heartbeat during a long phase,
the model call's own timeout flag, and a resumed run's progress starting from its best.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import threading

import pytest
from fake_openai import reply, slow
from test_cli_run import CPU, NO_CODE, REPO, agent, environment, json_events, ok

from agent.store import Store

HANG = "```python\n" + (REPO / "tests" / "candidates" / "infinite_loop.py").read_text() + "```\n"


@pytest.mark.slow  # runs the harness: the starting kernel, and a candidate until its time limit
def test_each_candidate_shows_as_its_verdict_lands_with_phases_and_elapsed_time(fake_openai, tmp_path):
    # #1 has no code (judged at once), #2 hangs until --timeout: before, both were shown when the round ended.
    fake_openai.script([reply(NO_CODE, HANG)])
    events, summary = json_events(agent("run", *CPU, "--llm", "openai", "--iterations", 1, "--samples", 2,
                                        "--timeout", 15, "--root", tmp_path, "--json", server=fake_openai))
    assert all("elapsed_s" in e for e in events)
    phases = [(e["phase"], e.get("total")) for e in events if e["event"] == "phase"]
    assert phases == [("evaluating", 1), ("proposing", None), ("evaluating", 2)]  # iteration 0, then 1
    landed = {e["index"]: e for e in events if e["event"] == "candidate" and e["iteration"] == 1}
    assert (landed[1]["verdict"], landed[2]["verdict"]) == ("no_code", "timeout")
    order = [e["index"] for e in events if e["event"] == "candidate" and e["iteration"] == 1]
    assert order == [1, 2]
    assert landed[2]["elapsed_s"] - landed[1]["elapsed_s"] > 10  # #1 was shown while #2 still ran
    with Store(tmp_path) as store:  # recorded as they landed, in their own places
        assert sorted(c.index for c in store.candidates(summary["run"]) if c.iteration == 1) == [1, 2]


@pytest.mark.slow  # evaluates the starting kernel
def test_a_log_gets_each_phase_and_a_heartbeat_while_the_model_is_slow(fake_openai, tmp_path):
    fake_openai.script([slow(4.0, reply(NO_CODE))])
    p = ok(agent("run", *CPU, "--llm", "openai", "--iterations", 1, "--samples", 1, "--root", tmp_path,
                 server=fake_openai, AGENT_PROGRESS__HEARTBEAT_S="1"))
    lines = p.stdout.splitlines()
    assert any("proposing: 1 answer from openai:gpt-4o" in line for line in lines), p.stdout
    assert any(line.strip().startswith("still proposing") for line in lines), p.stdout  # before: silence
    assert any("evaluating 1" in line for line in lines), p.stdout
    assert all(len(line) <= 200 for line in lines)


def test_the_model_calls_timeout_is_a_flag_and_its_hint_names_it(fake_openai, tmp_path):
    fake_openai.script([slow(20.0, reply(NO_CODE))])
    p = agent("run", *CPU, "--llm", "openai", "--iterations", 1, "--samples", 1, "--llm-timeout", 1,
              "--llm-retries", 0, "--root", tmp_path, "--quiet", server=fake_openai, timeout=120)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(err) == 1, p.stderr
    assert "within 1 s (after 1 attempt)" in err[0] and "raise --llm-timeout" in err[0]
    bad = agent("run", *CPU, "--llm-timeout", 0, "--root", tmp_path)
    assert bad.returncode == 2 and "--llm-timeout must be > 0" in bad.stderr


@pytest.mark.slow  # evaluates the starting kernel and two offline candidates
def test_a_resumed_run_starts_from_its_best_and_says_resumed_only_once(tmp_path):
    ok(agent("run", *CPU, "--llm", "offline", "--iterations", 0, "--root", tmp_path, "--quiet"))
    with Store(tmp_path) as store:
        [record] = store.list_runs()
    assert record.best is not None
    # On a terminal the footer stays on screen at the end: before, it said "no correct kernel yet" after a resume.
    env = environment(COLUMNS="160")
    env.pop("NO_COLOR")
    code, screen, err = on_a_terminal(["run", "--resume", record.id, "--iterations", 2, "--samples", 1, "--root",
                                       tmp_path], env)
    assert code == 0, err
    assert "no correct kernel yet" not in screen and "best " in screen
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)  # the footer as read, colours aside
    assert "evaluating 1: 0 done" in plain and " · run 0:" in plain  # before: no phase and no elapsed time
    with Store(tmp_path) as store:
        reasons = [it.reason for it in store.iterations(record.id)]
    assert reasons == ["starting kernel", "resumed", "requested"]  # before: "resumed" for every later iteration


def on_a_terminal(args: list[object], env: dict[str, str]) -> tuple[int, str, str]:
    """Run the CLI with a pseudo-terminal as stdout (read as it writes, so it never blocks); exit, screen, stderr."""
    main, sub = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "agent", *map(str, args)], stdin=sub, stdout=sub,
                            stderr=subprocess.PIPE, env=env, cwd=REPO, text=True)
    os.close(sub)
    chunks: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(main, chunks), daemon=True)
    reader.start()
    _, err = proc.communicate(timeout=300)
    reader.join(timeout=10)
    return proc.returncode, b"".join(chunks).decode(errors="replace"), err


def _drain(fd: int, chunks: list[bytes]) -> None:
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(fd)
