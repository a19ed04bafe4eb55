"""`agent report`'s summary of a run (agent.view.report_summary): the best against torch.compile and eager on each
clock in words, with both figures; for a run that did not finish, why it stopped, how far it got and the exact
`agent run --resume` command. Pages rendered by the real CLI from copies of the recorded CPU run (tests/test_report)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_report import NCU, RECORDED, agent

from agent.diagnosis import DIAGNOSIS_METRICS
from agent.ncu import read_report, stage_metric_set
from agent.stages import get_stage
from agent.store import Store

H100 = {"eager_device_ms": 1.753, "eager_latency_ms": 1.792, "compile_device_ms": 0.5631, "compile_latency_ms": 2.0}


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The recorded run as a GPU run would have left it: timings on both clocks (eager, and torch.compile faster than
    the best on the device clock, slower on the latency clock), H100 profiles on every correct candidate: two
    identical GAP kernels, a third beside them, the seed's below."""
    root = tmp_path_factory.mktemp("gpu") / "store"
    shutil.copytree(RECORDED, root, ignore=shutil.ignore_patterns("answers", "record.py"))
    metrics = [*stage_metric_set(get_stage("memory-fusion")), *DIAGNOSIS_METRICS]
    with Store(root) as s:
        [record] = s.list_runs()
        rid = record.id
        for cid, name in ((f"{rid}-i0-c0", "seed_h100_full"), (record.best, "memory_fusion_best_h100"),
                          (f"{rid}-i2-c3", "planted_healthy"), (f"{rid}-i3-c3", "memory_fusion_best_h100")):
            s.update_profile(cid, read_report(NCU / f"{name}.ncu-rep", metrics))
        for n, c in enumerate(s.candidates(rid)):
            if c.result.timing is None:
                continue
            dev = {f"{rid}-i0-c0": 1.882, record.best: 1.392}.get(c.id, 1.45 + 0.01 * n)
            c.result.timing = c.result.timing.model_copy(update={
                "objective": "device", "candidate_ms": dev, "device_ms": dev, "latency_ms": dev * 1.03,
                "meaningful": True, "note": "", **H100, "eager_ms": H100["eager_device_ms"],
                "compile_ms": H100["compile_device_ms"], "speedup_vs_eager": H100["eager_device_ms"] / dev,
                "speedup_vs_compile": H100["compile_device_ms"] / dev})
            s.record_candidate(c)
    return root, rid


@pytest.fixture(scope="module")
def gpu_page(gpu_run, tmp_path_factory: pytest.TempPathFactory) -> str:
    root, run_id = gpu_run
    out = tmp_path_factory.mktemp("gpu-page") / "run.html"
    r = agent("report", run_id, "--root", str(root), "-o", str(out))
    assert r.returncode == 0, r.stderr
    return out.read_text(encoding="utf-8")


def _figure(html: str, chart: str) -> dict:
    """The plotly figure (data and layout) the page draws in the div `chart`, as JSON."""
    import json
    import re

    found = re.search(r'Plotly\.newPlot\(\s*"' + re.escape(chart) + r'",\s*', html)
    assert found, chart
    decoder = json.JSONDecoder()
    data, end = decoder.raw_decode(html, found.end())
    layout, _ = decoder.raw_decode(html, re.compile(r"[\s,]*").match(html, end).end())
    return {"data": data, "layout": layout}


def test_the_summary_says_in_words_who_wins_on_each_clock_with_both_figures(gpu_page) -> None:
    from html import unescape

    summary = unescape(gpu_page[gpu_page.index('id="summary"'):gpu_page.index('id="run"')])
    assert ("On the device clock (the GPU's time, calls queued back to back), torch.compile beats the best: 0.563 ms "
            "against the best's 1.392 ms (2.47× faster than the best)") in summary
    assert ("On the latency clock (one synchronized call, host included), the best beats torch.compile: 1.434 ms "
            "against torch.compile's 2.000 ms (1.39× faster)") in summary
    assert "the best beats eager: 1.392 ms against eager's 1.753 ms (1.26× faster)" in summary


def _stop(root: Path, run_id: str, status: str, finished: bool, pid: int | None = None,
          reason: str | None = None) -> None:
    """Leave the recorded run's files as a stop would: its status, and its last iteration begun, not complete."""
    import json
    import socket

    run_json = root / "candidates" / run_id / "run.json"
    record = json.loads(run_json.read_text())
    record.update(status=status, pid=pid or record["pid"], host=socket.gethostname())
    if reason is not None:
        record["stop_reason"] = reason
    if not finished:
        record["finished_at"] = None
    run_json.write_text(json.dumps(record))
    last = root / "candidates" / run_id / "iterations" / "i0003-a1.json"
    it = json.loads(last.read_text())
    last.write_text(json.dumps({**it, "completed": False}))


def test_an_interrupted_run_says_why_it_stopped_how_far_it_got_and_how_to_resume(tmp_path) -> None:
    root = tmp_path / "store"
    shutil.copytree(RECORDED, root, ignore=shutil.ignore_patterns("answers", "record.py"))
    run_id = next(p.name for p in (root / "candidates").iterdir() if p.is_dir())
    _stop(root, run_id, "interrupted", finished=True)  # what `agent run` writes when a signal stops it
    out = tmp_path / "run.html"
    r = agent("report", run_id, "--root", str(root), "-o", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text(encoding="utf-8")
    box = html[html.index('id="stopped"'):html.index('id="summary"')]
    assert "stopped by a signal at 19:32:12 UTC, 0m44s in: Ctrl-C (SIGINT), SIGTERM" in box
    assert "iteration 3 had judged 3 of 3 candidates (a resume asks it again; nothing judged is lost)" in box
    assert f'<code class="resume">agent run --resume {run_id} --root {root.resolve()}</code>' in box
    # the iteration count agrees with the verdict chart's bars: i0 the start, i1-i2 done, i3 cut short
    assert ("2 of 3 done (i1–i2), i3 cut short after 3 candidates; i0 judged the starting kernel · 10 candidates"
            in html)
    bars = [t["x"] for t in _figure(html, "chart-verdicts")["data"]][0]
    assert bars == ["i0 start", "i1 memory-fusion", "i2 memory-fusion", "i3 parallelism (cut short)"]


@pytest.mark.parametrize(("status", "reason", "said"), [
    ("interrupted", "stopped by SIGTERM", "stopped by SIGTERM at 19:32:12 UTC, 0m44s in; the run killed"),
    ("failed", "the reference for problem gap44 failed: exit status 1",
     "the run stopped on an error at 19:32:12 UTC, 0m44s in: the reference for problem gap44 failed: exit status 1")])
def test_a_stopped_run_names_the_recorded_signal_or_error(tmp_path, status, reason, said) -> None:
    root = tmp_path / "store"
    shutil.copytree(RECORDED, root, ignore=shutil.ignore_patterns("answers", "record.py"))
    run_id = next(p.name for p in (root / "candidates").iterdir() if p.is_dir())
    _stop(root, run_id, status, finished=True, reason=reason)  # what `agent run` records since it keeps the reason
    out = tmp_path / "run.html"
    r = agent("report", run_id, "--root", str(root), "-o", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text(encoding="utf-8")
    box = html[html.index('id="stopped"'):html.index('id="summary"')]
    assert said in box and f"agent run --resume {run_id}" in box


def test_a_run_whose_process_vanished_says_so_with_its_pid(tmp_path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid no process has now
    root = tmp_path / "store"
    shutil.copytree(RECORDED, root, ignore=shutil.ignore_patterns("answers", "record.py"))
    run_id = next(p.name for p in (root / "candidates").iterdir() if p.is_dir())
    _stop(root, run_id, "running", finished=False, pid=gone.pid)
    out = tmp_path / "run.html"
    r = agent("report", run_id, "--root", str(root), "-o", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text(encoding="utf-8")
    assert f"its process (pid {gone.pid} on " in html and "ended without recording a stop" in html
    assert f"agent run --resume {run_id}" in html
