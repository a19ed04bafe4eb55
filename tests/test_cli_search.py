"""`agent run --search greedy|beam|tree` end to end: the real CLI in a subprocess, CPU mode, against the fake
OpenAI-compatible server answering by the code each prompt shows (tests/fake_openai.py's ByCode).

The recorded answers: from the starting kernel, a slow but correct kernel (tests/answers/slow_spin.md, several times
the start's time at any size) and prose; from the slow one, a fast one (one_program.md); everything else, prose
(no code: nothing to run, so it costs no harness time). Greedy never shows the slow kernel in a prompt (it is never
the best), so it never gets the fast one; tree takes it as a parent once the start has had its samples (agent.search:
by T = 10, in the fifth round of two samples, whatever the two times); beam at once (tested in test_loop_search.py
and by the resume test here). The decisive signal is which
code a prompt showed and which answers were judged, never a close race between CPU timings.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from fake_openai import ByCode, FakeOpenAI
from test_cli_run import ANSWERS, CPU, NO_CODE, REPO, agent, json_events, ok, start, stop, wait_for

from agent.harness.wall.proctree import descendants
from agent.store import Store

SLOW, FAST = ((ANSWERS / n).read_text() for n in ("slow_spin.md", "one_program.md"))
HANG = "```python\n# variant: hang\n" + (REPO / "tests" / "candidates" / "infinite_loop.py").read_text() + "```\n"
MEDIUM = (ANSWERS / "rowsum.md").read_text().replace("```python\n", "```python\n# variant: medium\n", 1)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """One store for both runs: the problem's truths and eager baselines are computed once."""
    return tmp_path_factory.mktemp("search")


@pytest.mark.slow  # runs the harness: the start, the slow kernel and (tree) the fast one
@pytest.mark.parametrize("search", ["greedy", "tree"])  # beam: tests/test_loop_search.py, and the resume test below
def test_tree_reaches_the_fast_kernel_through_a_slower_one_and_greedy_does_not(search, root):
    by_code = ByCode({"start": [SLOW, NO_CODE], "slow": [FAST]}, otherwise=NO_CODE)
    with FakeOpenAI(default=by_code).start() as server:
        events, summary = json_events(agent("run", *CPU, "--llm", "openai", "--search", search, "--iterations", 5,
                                            "--samples", 2, "--patience", 10, "--root", root, "--json",
                                            server=server))
    run = summary["run"]
    judged = {e["candidate"]: e for e in events if e["event"] == "candidate" and e["verdict"] == "correct"}
    slow, fast = f"{run}-i1-c1", [c for c, e in judged.items() if e["parent"] == f"{run}-i1-c1"]
    assert judged[slow]["parent"] == f"{run}-i0-c0" and judged[slow]["candidate_ms"] > judged[f"{run}-i0-c0"][
        "candidate_ms"]  # the intermediate: slower than where it started
    if search == "greedy":
        assert "slow" not in by_code.asked and fast == []  # never shown the slow kernel: never offered the fast one
        assert summary["best"] == f"{run}-i0-c0"
        return
    assert "slow" in by_code.asked and len(fast) == 1
    assert judged[fast[0]]["candidate_ms"] < judged[slow]["candidate_ms"]
    rows = json.loads(ok(agent("leaderboard", "--run", run, "--root", root, "--json")).stdout)
    assert {r["candidate"]: r["parent"] for r in rows}[fast[0]] == slow
    shown = ok(agent("show", fast[0], "--root", root, "--no-pager")).stdout
    assert f"parent     {slow}" in shown


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit is reaped by whatever init the machine has, maybe late)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


@pytest.mark.slow  # runs the harness: the start, one correct kernel, a hanging one
def test_a_beam_run_killed_mid_round_resumes_from_the_same_parents_and_memory_and_duplicates_nothing(tmp_path):
    # iteration 1 (from the start): a correct kernel and prose; iteration 2 (beam 2: the start and that kernel): prose
    # from the start, which lands at once, and a kernel that never ends from the other; the run is killed then
    by_code = ByCode({"start": [MEDIUM, NO_CODE], "medium": [HANG]}, otherwise=NO_CODE)
    server = FakeOpenAI(default=by_code).start()
    try:
        proc = start("run", *CPU, "--llm", "openai", "--search", "beam", "--beam", 2, "--iterations", 3, "--samples", 2,
                     "--timeout", 300, "--root", tmp_path, "--json", server=server)

        def second_round_half_landed() -> bool:
            if len(server.requests) < 3 or not (tmp_path / "candidates").is_dir():
                return False
            with Store(tmp_path) as s:
                runs = s.list_runs()
                return bool(runs) and any(c.iteration == 2 for c in s.candidates(runs[0].id))

        wait_for(second_round_half_landed, 240, proc)
        # the hanging kernel's sandbox: below the agent and still there seconds later (a reference worker or a
        # sandbox starting up comes and goes; the prose lands before the hang's sandbox exists)
        seen: dict[int, float] = {}

        def hanging() -> bool:
            now, below_now = time.monotonic(), descendants(proc.pid)
            for p in below_now:
                seen.setdefault(p, now)
            return any(now - seen[p] >= 3.0 for p in below_now)

        wait_for(hanging, 240, proc)
        below = descendants(proc.pid)
        assert below
        stop(proc, signal.SIGKILL)
        # no handler runs on SIGKILL: the sandboxes die with the agent (their parent-death signal), not at their
        # 300 s timeout, which nobody is left to enforce
        deadline = time.monotonic() + 15
        while (alive := [p for p in below if _running(p)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        def _cmd(p):
            try:
                return open(f"/proc/{p}/cmdline").read().replace("\0", " ")[:300] + " ppid=" + open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1]
            except OSError:
                return "?"
        assert not alive, f"sandboxed processes outlived the killed agent: {[(p, _cmd(p)) for p in alive]} below={[(p, _cmd(p)) for p in below]}"
        with Store(tmp_path) as s:
            [record] = s.list_runs()
            run = record.id
            before = {c.id: c.model_dump() for c in s.candidates(run)}
        killed = json.loads((tmp_path / "candidates" / run / "iterations" / "i0002-a1.json").read_text())["groups"]
        assert [g["k"] for g in killed] == [1, 1] and {g["parent"] for g in killed} == {f"{run}-i0-c0", f"{run}-i1-c1"}
        landed = f"i2-c{1 + [g['parent'] for g in killed].index(f'{run}-i0-c0')}"
        assert sorted(c for c in before if "-i2-" in c) == [f"{run}-{landed}"]  # the start's prose; the hang never
        sent = [r["messages"][-1]["content"] for r in server.requests]

        refused = agent("run", "--resume", run, "--search", "tree", "--root", tmp_path, server=server)
        assert refused.returncode == 2 and "--search tree: run" in refused.stderr and "keeps it" in refused.stderr
        events, summary = json_events(agent("run", "--resume", run, "--iterations", 4, "--max-candidates", 6,
                                            "--root", tmp_path, "--json", server=server))
    finally:
        server.stop()
    redone = [r["messages"][-1]["content"] for r in server.requests[len(sent):]]
    assert redone[:2] == sent[1:3]  # the interrupted round asked again: same parents, same prompts, same memory
    assert "[MEMORY]" in redone[0] and "i1-c1 from i0-c0" in redone[0]
    with Store(tmp_path) as s:
        after = s.candidates(run)
        ids = [c.id for c in after]
        assert len(ids) == len(set(ids))  # nothing recorded twice
        assert {c.id: c.model_dump() for c in after if c.id in before} == before  # nothing recorded before changed
        redo = json.loads((tmp_path / "candidates" / run / "iterations" / "i0002-a2.json").read_text())["groups"]
        assert redo == killed
        assert [c.parent for c in after if c.iteration == 2 and "a2-" in c.id] == [g["parent"] for g in killed]
        third = [it for it in s.iterations(run) if it.iteration == 3]
        assert f"- {landed} from i0-c0" in third[0].prompt  # the next round remembers the killed attempt's too
        assert s.get_run(run).config.max_candidates == 6  # a budget a resume may change
    assert summary["stop_reason"].startswith("candidate budget spent (6 of --max-candidates 6")
    replayed = json.loads(ok(agent("prompts", run, "--root", tmp_path, "--format", "json")).stdout)
    assert replayed and all(r["matches"] for r in replayed)
