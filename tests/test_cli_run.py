"""`agent run` end to end: the real CLI in a subprocess, CPU mode, against the fake OpenAI-compatible server
(real HTTP on 127.0.0.1) serving the hand-written answers in tests/answers/; then the commands that read a run
(leaderboard, show, export, replay), `--llm replay:RUN_ID`, resume after a SIGKILL, bad input, and the offline
proposer as the default without a key.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, reply, slow, unauthorized

from agent.store import Store

REPO = Path(__file__).resolve().parent.parent
ANSWERS = Path(__file__).resolve().parent / "answers"
WRONG, TWO_BLOCKS, NO_CODE = ((ANSWERS / n).read_text() for n in ("wrong_scale.md", "two_blocks.md", "no_code.md"))
CPU = ["--device", "cpu", "--gpu", "4090"]  # --gpu: no "no CUDA device detected" warning on stderr

def environment(server: FakeOpenAI | None = None, **extra: str) -> dict[str, str]:
    """The subprocess's environment: no OpenAI or agent settings of the developer's (AGENT_CONFIG points nowhere
    unless given), the fake server's where given, then `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENT_"))}
    env.update({"COLUMNS": "200", "NO_COLOR": "1", "XDG_CONFIG_HOME": str(REPO / "tests" / "data" / "no-config")})
    if server is not None:
        env.update({"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-fake"})
    env.update(extra)
    return env


def agent(*args: object, server: FakeOpenAI | None = None, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *map(str, args)], capture_output=True, text=True, cwd=REPO,
                          env=environment(server, **env), timeout=timeout)


def priced_as_openai(server: FakeOpenAI, folder: Path, model: str = "gpt-4o") -> str:
    """A user config giving the fake server's model OpenAI's price (a local server has none of its own)."""
    from agent.llm import price_for

    price = price_for(model)
    assert price is not None
    path = folder / "config.toml"
    path.write_text(f'[prices."{model}"]\ninput = {price.input}\noutput = {price.output}\n'
                    f'base_url = "{server.base_url}"\n')
    return str(path)


def ok(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def json_events(p: subprocess.CompletedProcess) -> tuple[list[dict], dict]:
    """`agent run --json`: one object per event, then the summary."""
    lines = [json.loads(line) for line in ok(p).stdout.splitlines() if line.strip()]
    return lines[:-1], lines[-1]


def verdicts(events: list[dict]) -> dict[tuple[int, int], str]:
    return {(e["iteration"], e["index"]): e["verdict"] for e in events if e["event"] == "candidate"}


# ---------------------------------------------------------------- one recorded run, read many ways


@pytest.fixture(scope="module")
def server():
    s = FakeOpenAI().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def recorded(server, tmp_path_factory) -> dict:
    """A 2 iterations x 2 samples run against the fake server: two blocks + wrong scale, then prose twice (no code:
    nothing to run, so the second iteration costs no harness time but still gets the first one's feedback)."""
    root = tmp_path_factory.mktemp("recorded")
    server.script([reply(TWO_BLOCKS, WRONG), reply(NO_CODE)])
    config = priced_as_openai(server, tmp_path_factory.mktemp("config"))
    # greedy: one request a round, so the script's two replies are the run's two rounds (beam, the default, asks
    # one request per parent)
    events, summary = json_events(agent("run", *CPU, "--llm", "openai", "--model", "gpt-4o", "--iterations", 2,
                                        "--samples", 2, "--search", "greedy", "--root", root, "--json", server=server,
                                        AGENT_CONFIG=config))
    return {"root": root, "run": summary["run"], "events": events, "summary": summary,
            "requests": list(server.requests)}


@pytest.mark.slow  # runs the harness (or reads a run that did)
def test_run_with_the_fake_server_records_every_candidate_verdict_and_call(recorded):
    run, events, summary = recorded["run"], recorded["events"], recorded["summary"]
    assert verdicts(events) == {(0, 0): "correct", (1, 1): "correct", (1, 2): "incorrect", (2, 1): "no_code",
                                (2, 2): "no_code"}
    assert [r["n"] for r in recorded["requests"]] == [2, 2] and recorded["requests"][0]["model"] == "gpt-4o"
    assert summary["iterations"] == 2 and summary["stop_reason"] == "completed 2 iterations"
    assert summary["usage"]["prompt_tokens"] > 0 and summary["usage"]["cost_usd"] > 0  # priced by the user config
    assert summary["usage"]["priced"] is True
    with Store(recorded["root"]) as store:
        assert [c.iteration for c in store.calls(run)] == [1, 2]  # every exchange saved with its iteration
        record = store.get_run(run)
        assert (record.status, record.candidates, record.config.llm, record.best) == (
            "finished", 5, "openai", summary["best"])
        # the second prompt tells the model what went wrong in the first round
        second = store.iterations(run)[2].prompt
        assert "[FEEDBACK FROM PREVIOUS ATTEMPTS]" in second and "- #2: incorrect" in second
        assert recorded["requests"][1]["messages"][-1]["content"] == second  # what was sent is what was recorded


@pytest.mark.slow  # runs the harness (or reads a run that did)
def test_leaderboard_json_ranks_the_correct_candidates_with_their_fields(recorded):
    rows = json.loads(ok(agent("leaderboard", "--root", recorded["root"], "--json")).stdout)
    run = recorded["run"]
    assert {r["candidate"] for r in rows} == {f"{run}-i0-c0", f"{run}-i1-c1"}
    for r in rows:
        assert {"candidate", "run", "stage", "verdict", "candidate_ms", "speedup_vs_eager",
                "speedup_vs_compile"} <= set(r)
        assert (r["run"], r["stage"], r["verdict"], r["meaningful"]) == (run, "memory-fusion", "correct", False)
        assert r["candidate_ms"] > 0
    assert [r["rank"] for r in rows] == [1, 2]
    everything = json.loads(ok(agent("leaderboard", "--root", recorded["root"], "--json", "--all")).stdout)
    assert len(everything) == 5 and everything[-1]["verdict"] != "correct"  # failures ranked last


@pytest.mark.slow  # runs the harness (or reads a run that did)
def test_show_prints_the_verdict_code_prompt_and_response(recorded):
    out = ok(agent("show", f"{recorded['run']}-i1-c2", "--full", "--root", recorded["root"])).stdout
    assert "incorrect" in out
    assert "gap_sum_kernel" in out  # the code
    assert "BUG (on purpose)" in out and "Fuse the multiplier" in out  # the response, prose included
    assert "memory-fusion" in out  # the prompt's stage


@pytest.mark.slow  # runs the harness (or reads a run that did)
def test_export_writes_exactly_the_evaluated_code(recorded, tmp_path):
    candidate = f"{recorded['run']}-i1-c1"  # the answer with a usage snippet first: the ModelNew block is the code
    out = tmp_path / "kernel.py"
    ok(agent("export", candidate, "-o", out, "--root", recorded["root"]))
    with Store(recorded["root"]) as store:
        code = store.get_candidate(candidate).code
    assert out.read_text() == code
    assert code.startswith("import torch") and "gap_row_kernel" in code and "get_init_inputs()" not in code
    compile(code, str(out), "exec")


@pytest.mark.slow  # runs the harness (or reads a run that did)
def test_replay_of_the_run_rerenders_every_prompt_identically(recorded):
    replayed = json.loads(ok(agent("prompts", recorded["run"], "--root", recorded["root"], "--format", "json")).stdout)
    assert [(r["iteration"], r["matches"]) for r in replayed] == [(1, True), (2, True)]
    text = ok(agent("prompts", recorded["run"], "--root", recorded["root"])).stdout
    assert text.count("identical to the prompt sent") == 2 and "differs" not in text


@pytest.mark.slow  # runs the harness (or reads a run that did)
def test_llm_replay_reproduces_the_verdicts_with_no_server(recorded, server):
    sent = len(server.requests)
    events, summary = json_events(agent("run", *CPU, "--llm", f"replay:{recorded['run']}", "--iterations", 2,
                                        "--samples", 2, "--root", recorded["root"], "--json"))  # no OPENAI_* at all
    assert verdicts(events) == verdicts(recorded["events"])
    assert len(server.requests) == sent
    assert summary["usage"]["cost_usd"] == 0  # a replay spends nothing
    with Store(recorded["root"]) as store:
        assert store.get_run(summary["run"]).config.llm == f"replay:{recorded['run']}"
        assert store.calls(summary["run"]) == []


# ---------------------------------------------------------------- resume after a kill


def wait_for(condition, timeout_s: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the run ended early (exit {proc.returncode})\nstdout:\n{out}\nstderr:\n{err}")
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for the run")
        time.sleep(0.05)


def start(*args: object, server: FakeOpenAI) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "agent", *map(str, args)], cwd=REPO, env=environment(server),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def stop(proc: subprocess.Popen, sig: signal.Signals) -> tuple[str, str]:
    """Send `sig` to the run (SIGKILL: to its whole process group) and collect what it printed."""
    try:
        if sig == signal.SIGKILL:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.mark.slow  # runs the harness (or reads a run that did)
def test_an_interrupted_or_killed_run_resumes_without_losing_or_duplicating_a_candidate(fake_openai, tmp_path):
    # Iteration 1 is answered; iteration 2's request hangs (twice), so each stop lands at a known point: after
    # iteration 1's candidates are recorded, while iteration 2 waits for its answers.
    fake_openai.script([reply(WRONG, NO_CODE), slow(120.0, reply(NO_CODE)), slow(120.0, reply(NO_CODE)),
                        reply(NO_CODE)])  # prose: nothing to run, so only iteration 1 costs harness time
    proc = start("run", *CPU, "--llm", "openai", "--iterations", 2, "--samples", 2, "--root", tmp_path, "--json",
                 server=fake_openai)
    wait_for(lambda: len(fake_openai.requests) == 2, 150, proc)
    with Store(tmp_path) as store:
        [record] = store.list_runs()
        run = record.id
        assert record.status == "running"
        before = {c.id: c.model_dump() for c in store.candidates(run)}
    assert sorted(before) == [f"{run}-i0-c0", f"{run}-i1-c1", f"{run}-i1-c2"]
    busy = agent("run", "--resume", run, "--root", tmp_path, server=fake_openai)
    assert busy.returncode == 2 and "still running" in busy.stderr  # two loops must not write one run

    # Ctrl-C: one line saying how to continue, and the run is marked interrupted
    out, err = stop(proc, signal.SIGINT)
    assert proc.returncode == 130 and "interrupted" in err and f"agent run --resume {run}" in err, err
    assert len(err.strip().splitlines()) == 1
    with Store(tmp_path) as store:
        assert store.get_run(run).status == "interrupted"

    # resumed, then killed outright (like a power loss: no handler runs) while iteration 2 waits again
    proc = start("run", "--resume", run, "--root", tmp_path, "--json", server=fake_openai)
    wait_for(lambda: len(fake_openai.requests) == 3, 60, proc)
    stop(proc, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    with Store(tmp_path) as store:
        assert store.get_run(run).status == "interrupted"  # its process is gone

    events, summary = json_events(agent("run", "--resume", run[:-2], "--root", tmp_path, "--json",
                                        server=fake_openai))  # a unique prefix of the id is enough
    assert summary["run"] == run and summary["iterations"] == 2
    assert verdicts(events) == {(2, 1): "no_code", (2, 2): "no_code"}  # only the unfinished iteration ran again
    # each attempt at iteration 2 asked with the very prompt the first one sent, feedback included
    assert [r["messages"] for r in fake_openai.requests[2:]] == [fake_openai.requests[1]["messages"]] * 2
    assert "- #1: incorrect" in fake_openai.requests[3]["messages"][-1]["content"]
    with Store(tmp_path) as store:
        after = store.candidates(run)
        ids = [c.id for c in after]
        assert len(ids) == len(set(ids)) == 5 and f"{run}-i2a3-c1" in ids
        assert {c.id: c.model_dump() for c in after if c.id in before} == before  # unchanged
        assert store.get_run(run).status == "finished"
    replayed = json.loads(ok(agent("prompts", run, "--root", tmp_path, "--format", "json")).stdout)
    assert [r["matches"] for r in replayed] == [True, True]


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("flags", [
    ["--stage", "fastest"],
    ["--samples", "0"],
    ["--iterations", "-1"],
    ["--llm", "claude"],
    ["--llm", "replay:no-such-run"],
    ["--resume", "no-such-run"],
    ["--timeout", "0"],
    ["--patience", "0"],
    ["--budget-usd", "-1"],
    ["--samples", "100000"],
    ["--search", "bfs"],
    ["--beam", "0"],
    ["--beam", "100"],
    ["--memory", "maybe"],
    ["--max-candidates", "0"],
    ["--max-minutes", "0"],
    ["--max-minutes", "nan"],
], ids=lambda f: " ".join(f))
def test_bad_input_is_one_line_and_exit_2_and_records_nothing(flags, tmp_path):
    p = agent("run", *CPU, "--iterations", 1, *flags, "--root", tmp_path, timeout=60)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert p.stdout == ""
    assert not [d for d in (tmp_path / "candidates").glob("*") if d.is_dir()]  # no run was created


@pytest.mark.slow  # evaluates the starting kernel
def test_a_cpu_run_without_gpu_says_its_target_in_its_header_not_in_a_warning_and_survives_a_narrow_pipe(tmp_path):
    env = {**environment(), "COLUMNS": "40"}  # piped into a log through a narrow terminal's settings
    p = subprocess.run([sys.executable, "-m", "agent", "run", "--device", "cpu", "--llm", "offline", "--iterations", "0",
                        "--root", str(tmp_path)], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "WARNING" not in p.stderr and "no CUDA device detected" not in p.stderr, p.stderr
    assert "target 4090, the seed's GPU: --gpu NAME to choose" in p.stdout  # one line, however narrow
    [line] = [ln for ln in p.stdout.splitlines() if "export with:" in ln]
    assert line.rstrip().endswith("-o kernel.py") and "agent export " in line  # the command to copy, whole


# /proc: os.access says writable to root, yet no folder can be made there (tmp_path / "/proc" is "/proc")
@pytest.mark.parametrize("where", ["missing/parent/dir", "a_file", "/proc"])
def test_a_root_that_cannot_be_one_is_refused_not_created(where, tmp_path):
    (tmp_path / "a_file").write_text("x")
    root = tmp_path / where
    p = agent("run", *CPU, "--iterations", 0, "--root", root, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--root" in p.stderr, p.stderr
    assert not (tmp_path / "missing").exists()


def test_openai_without_a_key_is_one_line_and_records_nothing(tmp_path):
    p = agent("run", *CPU, "--llm", "openai", "--root", tmp_path, timeout=60)
    assert p.returncode == 2 and "OPENAI_API_KEY" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not [d for d in (tmp_path / "candidates").glob("*") if d.is_dir()]


def test_a_cpu_run_without_gpu_that_fails_says_only_its_error(tmp_path):
    """No --gpu on a machine without CUDA: before, 'WARNING agent.catalog: no CUDA device detected ...' came first,
    even with --device cpu, so an error was two lines (CPU above passes --gpu and never saw it)."""
    p = agent("run", "--device", "cpu", "--llm", "openai", "--root", tmp_path, timeout=60)  # no key
    assert p.returncode == 2
    [line] = p.stderr.strip().splitlines()
    assert line.startswith("error: ") and "WARNING" not in p.stderr and "no CUDA device" not in p.stderr


def test_an_endpoint_that_rejects_the_key_is_one_line_before_anything_runs(fake_openai, tmp_path):
    fake_openai.reject_keys = True
    t0 = time.monotonic()
    p = agent("run", *CPU, "--llm", "openai", "--iterations", 1, "--root", tmp_path, server=fake_openai, timeout=60)
    assert p.returncode == 2 and time.monotonic() - t0 < 30, p.stderr  # no starting kernel was evaluated
    assert len(p.stderr.strip().splitlines()) == 1 and "rejected the API key" in p.stderr, p.stderr
    assert "sk-fake" not in p.stderr and fake_openai.requests == []  # one GET of the model list, no completion
    assert not [d for d in (tmp_path / "candidates").glob("*") if d.is_dir()]  # no run, no seed row


def test_an_endpoint_that_is_down_is_one_line_before_anything_runs(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**environment(), "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "sk-fake"}
    p = subprocess.run([sys.executable, "-m", "agent", "run", *CPU, "--llm", "openai", "--root", str(tmp_path)],
                       capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "cannot reach" in p.stderr, p.stderr
    assert not [d for d in (tmp_path / "candidates").glob("*") if d.is_dir()]


def test_an_llm_failure_mid_run_ends_it_as_failed_with_one_line_and_exit_2(fake_openai, tmp_path):
    # conv3d_gap has no starting kernel: the first thing the run does is ask the LLM, which refuses the key.
    fake_openai.script([unauthorized()])
    p = agent("run", *CPU, "--problem", "conv3d_gap", "--llm", "openai", "--iterations", 2, "--root", tmp_path,
              server=fake_openai, timeout=120)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "stopped early" in lines[0] and "OPENAI_API_KEY" in lines[0] and "--resume" in lines[0]
    [run] = Store(tmp_path).list_runs()
    assert run.status == "failed"


# ---------------------------------------------------------------- the offline proposer


@pytest.mark.slow  # runs the harness (or reads a run that did)
def test_without_a_key_the_offline_proposer_runs_and_the_screen_says_so(tmp_path):
    out = ok(agent("run", *CPU, "--iterations", 1, "--samples", 2, "--root", tmp_path)).stdout  # no --llm, no key
    assert "no OPENAI_API_KEY: using the embedded offline proposer" in out
    assert "proposer offline" in out
    rows = json.loads(ok(agent("leaderboard", "--root", tmp_path, "--json", "--all")).stdout)
    assert sorted((r["iteration"], r["verdict"]) for r in rows if r["iteration"] == 0) == [(0, "correct")]
    offline = [r for r in rows if r["iteration"] == 1]
    assert len(offline) == 2 and all(r["verdict"] == "correct" for r in offline), rows
    assert all(r["tokens"] == 0 and r["cost_usd"] == 0 for r in rows)
    with Store(tmp_path) as store:
        [record] = store.list_runs()
        assert record.config.llm == "offline" and record.status == "finished"
        # no --search: beam, the default since the H100 and H200 comparisons (BENCHMARKS §14)
        assert (record.config.search, record.config.beam) == ("beam", 3)
    assert "search beam 3" in out


def _workers_of(pid: int) -> list[int]:
    """The candidate workers below process `pid` (sandboxes: unshare, its init, the worker)."""
    from agent.harness.wall.proctree import descendants

    found = []
    for child in descendants(pid):
        try:
            if b"agent.harness.worker.main" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except OSError:
            pass
    return found


def _alive(pids: list[int]) -> list[int]:
    from agent.harness.wall.proctree import alive

    return [p for p in pids if alive(p)]


@pytest.mark.slow  # runs the harness
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_ends_the_run_cleanly_and_takes_the_candidates_sandboxes_with_it(fake_openai, tmp_path, sig):
    """`timeout`, a scheduler or a container stop sends SIGTERM; a closed terminal SIGHUP: the same as Ctrl-C."""
    hang = "```python\n" + (REPO / "tests" / "candidates" / "infinite_loop.py").read_text() + "```\n"
    fake_openai.script([reply(hang, hang)])
    proc = start("run", *CPU, "--llm", "openai", "--iterations", 1, "--samples", 2, "--root", tmp_path, "--json",
                 "--timeout", 300, server=fake_openai)
    wait_for(lambda: len(fake_openai.requests) == 1 and len(_workers_of(proc.pid)) >= 2, 150, proc)
    workers = _workers_of(proc.pid)
    t0 = time.monotonic()
    out, err = stop(proc, sig)
    assert proc.returncode == 128 + sig and time.monotonic() - t0 < 20, (proc.returncode, err)
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err and signal.Signals(sig).name in err, err
    with Store(tmp_path) as store:
        [record] = store.list_runs()
        assert record.status == "interrupted"
        assert store.get_run(record.id).stop_reason == f"stopped by {signal.Signals(sig).name}"  # the report says it
    time.sleep(1)
    assert _alive(workers) == []  # no orphan holds a CPU (or, on a GPU host, the GPU)


@pytest.mark.slow  # evaluates the starting kernel and one more candidate
def test_resume_goes_on_with_more_iterations_and_refuses_to_change_what_the_run_measures(tmp_path):
    ok(agent("run", *CPU, "--llm", "offline", "--iterations", 0, "--root", tmp_path, "--quiet"))
    with Store(tmp_path) as store:
        [record] = store.list_runs()
    changed = agent("run", "--resume", record.id, "--stage", "algebraic", "--root", tmp_path)
    assert changed.returncode == 2 and len(changed.stderr.strip().splitlines()) == 1
    assert "--stage algebraic" in changed.stderr and "keeps it" in changed.stderr
    changed = agent("run", "--resume", record.id, "--diagnosis", "off", "--root", tmp_path)
    assert changed.returncode == 2 and "--diagnosis off: run" in changed.stderr and "started with on" in changed.stderr
    assert record.config.diagnosis is True  # agent run turns the [DIAGNOSIS] block on by default
    ok(agent("run", "--resume", record.id, "--iterations", 1, "--samples", 1, "--root", tmp_path, "--quiet"))
    with Store(tmp_path) as store:  # before: the finished run stayed at iteration 0, exit 0, nothing said
        after = store.get_run(record.id)
        assert (after.status, after.iterations, after.config.iterations, after.config.samples) == ("finished", 1, 1, 1)
        assert after.candidates == 2


@pytest.mark.parametrize(("flags", "early"), [([], True), (["--device", "cuda"], True), (["--device", "cpu"], False),
                                              (["--gpus", "0,1"], False)])
def test_on_a_gpu_host_the_workers_template_starts_before_the_run_imports_torch_to_find_its_gpu(
        monkeypatch, tmp_path, flags, early):
    # The template (its own process, importing torch and Triton) and this process's torch import overlap; CPU mode,
    # a pool of GPUs and a host without a CUDA driver start nothing early.
    import threading

    import agent.catalog
    import agent.commands.run as run_command
    from agent.cli import main
    from agent.harness import runner

    started: list[str] = []
    monkeypatch.setattr(agent.catalog, "cuda_driver_loads", lambda: True)
    monkeypatch.setattr(runner, "prestart", lambda device: started.append(device) or True)
    seen: list[bool] = []

    def assembly(args, values):  # the point where the run imports torch (default_device, the GPU's name)
        seen.append(bool(started) or any(t.name == "template-early" for t in threading.enumerate()))
        from agent.errors import UserError

        raise UserError("stopped here by the test")

    monkeypatch.setattr(run_command, "_assembly", assembly)
    monkeypatch.setattr("agent.cli.signal.signal", lambda *a: None)  # this test process keeps its own handlers
    with pytest.raises(SystemExit):
        main(["run", "--root", str(tmp_path), *flags])
    for t in threading.enumerate():
        if t.name == "template-early":
            t.join(5)
    assert seen == [early] and started == (["cuda"] if early else [])
