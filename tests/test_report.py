"""`agent report`: the page of a recorded CPU run (tests/data/report_run, a real `agent run --device cpu`: see its
record.py), rendered by the real CLI and opened in a real headless Chromium, where every chart must have drawn.

CPU mode takes no ncu profile; so that the roofline and the metrics diff have something to show, the copy in tmp
gets the H100 profiles a GPU run would have taken: the seed kernel's stage-set report on the starting kernel (it is
that kernel; its report lacks the roofline's counters) and the memory-fusion best's full report on the run's best."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agent.diagnosis import DIAGNOSIS_METRICS
from agent.ncu import read_report, stage_metric_set
from agent.stages import get_stage
from agent.store import Store

REPO = Path(__file__).resolve().parent.parent
RECORDED = REPO / "tests" / "data" / "report_run"
NCU = REPO / "tests" / "data" / "ncu"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--virtual-time-budget=8000"]


def agent(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("report") / "store"
    shutil.copytree(RECORDED, root, ignore=shutil.ignore_patterns("answers", "record.py"))
    metrics = [*stage_metric_set(get_stage("memory-fusion")), *DIAGNOSIS_METRICS]
    with Store(root) as s:
        [record] = s.list_runs()
        s.update_profile(f"{record.id}-i0-c0", read_report(NCU / "seed_h100_metrics.ncu-rep", metrics))
        s.update_profile(record.best, read_report(NCU / "memory_fusion_best_h100.ncu-rep", metrics))
    return root, record.id


@pytest.fixture(scope="module")
def page(run, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root, run_id = run
    out = tmp_path_factory.mktemp("page") / "run.html"
    r = agent("report", run_id[-4:], "--root", str(root), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stderr and r.stdout == ""
    return out, out.read_text(encoding="utf-8")


class _Charts(HTMLParser):
    """For each chart div (by id): the classes of every element inside it, as Chromium left the DOM."""

    def __init__(self, ids: tuple[str, ...]) -> None:
        super().__init__()
        self.ids, self.inside, self.depth = ids, None, 0
        self.found: dict[str, list[str]] = {}
        self.own: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if self.inside is None and a.get("id") in self.ids:
            self.inside, self.depth = a["id"], 0
            self.own[self.inside] = a.get("class") or ""
            self.found[self.inside] = []
        if self.inside is not None:
            if tag not in ("br", "img", "input", "meta", "link", "path", "rect", "line", "circle", "use", "image"):
                self.depth += 1  # svg's childless elements are written as <path ...></path> by the DOM dump
            self.found[self.inside].append(f"{tag}.{a.get('class') or ''}")

    def handle_endtag(self, tag: str) -> None:
        if self.inside is not None and tag not in ("br", "img", "input", "meta", "link", "path", "rect", "line",
                                                   "circle", "use", "image"):
            self.depth -= 1
            if self.depth == 0:
                self.inside = None


def _fetched(html: str) -> list[str]:
    """What a page's tags would fetch (script src, link href, img src): a script's own text is not parsed."""
    found: list[str] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            found.extend(v for k, v in a.items() if v and (k, tag) in (("src", "script"), ("href", "link"),
                                                                       ("src", "img"), ("src", "iframe")))

    Tags().feed(html)
    return found


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium; README's test command installs it)")
    return found


def test_every_chart_draws_in_a_real_headless_chromium_and_a_screenshot_is_saved(page, tmp_path) -> None:
    from agent.view.report import CHART_IDS

    chromium = _chromium()
    path, html = page
    assert _fetched(html) == []  # plotly.js is inside: it opens offline
    drawn = [i for i in CHART_IDS if f'id="{i}"' in html]
    assert drawn == ["chart-progress-candidates", "chart-progress-time", "chart-roofline", "chart-verdicts"]
    base = [chromium, *CHROMIUM_FLAGS]
    dom = subprocess.run([*base, f"--user-data-dir={tmp_path / 'profile-dom'}", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    charts = _Charts(tuple(drawn))
    charts.feed(dom.stdout)
    assert sorted(charts.found) == sorted(drawn)
    for chart in drawn:
        inside = charts.found[chart]
        assert "js-plotly-plot" in charts.own[chart], chart  # plotly.js ran on it
        assert any(e.startswith("svg.main-svg") for e in inside), chart  # and drew its SVG
        assert any(e.startswith("g.trace") for e in inside), chart  # with its data in it
    roof = charts.found["chart-roofline"]
    assert sum(e.startswith("path.point") for e in roof) == 1  # the one kernel with the roofline's counters
    bars = charts.found["chart-verdicts"]
    assert sum(e.startswith("g.trace bars") for e in bars) == 6  # correct and five kinds of failure

    shot = tmp_path / "report.png"
    r = subprocess.run([*base, f"--user-data-dir={tmp_path / 'profile-shot'}", "--window-size=1400,4300",
                        f"--screenshot={shot}", path.as_uri()], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", r.stderr[-2000:]
    assert shot.stat().st_size > 100_000  # charts and tables, not a blank page
    keep = os.environ.get("AGENT_REPORT_SCREENSHOT")  # docs/report-cpu-run.png was saved this way
    if keep:
        shutil.copyfile(shot, keep)


def test_the_page_shows_the_runs_facts_failures_bests_and_stage_path(page, run) -> None:
    _, html = page
    root, run_id = run
    with Store(root) as s:
        cands = s.candidates(run_id)
        record = s.get_run(run_id)
    failed = [c for c in cands if c.result.verdict != "correct"]
    assert len(failed) == 6
    for c in failed:  # every failure, in the table, with the first line of its message
        assert c.id in html and c.result.message.splitlines()[0].replace("'", "&#39;")[:60] in html
    assert "energy: not measured: CPU mode: no GPU energy counter" in html
    assert "CPU mode (TRITON_INTERPRET=1)" in html
    # the new bests: the starting kernel, then the best, with its metrics diff and a side-by-side code diff
    assert html.index(f"{run_id}-i0-c0</code> · iteration 0") < html.index(f"{record.best}</code> · iteration 1")
    assert 'class="better">better</td>' in html and 'class="worse">worse</td>' in html  # directions
    assert "DRAM throughput" in html and 'table class="diff"' in html and "gap_all_rows" in html
    assert "its profile lacks the FLOP or DRAM byte counters" in html  # the seed's stage-set report: not placed
    # the stage path: memory-fusion, then parallelism, with why
    assert "memory-fusion stalled; no profile to classify, next on the ladder" in html
    assert html.index("<b>memory-fusion</b>") < html.index("<b>parallelism</b>")
    for fact in ("replay:", "H100 SXM", "torch", "triton", "python", "tokens", "cost", "objective"):
        assert fact in html, fact


def test_report_bad_input_is_one_line_and_exit_2(run, tmp_path) -> None:
    root, run_id = run
    r = agent("report", "nope", "--root", str(root), "-o", str(tmp_path / "x.html"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "unknown run 'nope'" in r.stderr
    r = agent("report", run_id, "--root", str(root), "-o", str(tmp_path / "missing" / "x.html"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "cannot write" in r.stderr
    r = agent("report", run_id, "--root", str(root), "-o", str(tmp_path))
    assert r.returncode == 2 and "is a directory" in r.stderr
    r = agent("report", run_id, "--root", str(tmp_path / "empty"))
    assert r.returncode == 2 and "no runs under" in r.stderr
    assert not list(tmp_path.glob("*.html"))


def test_report_reads_a_read_only_store(run, tmp_path) -> None:
    from test_cli_runs import _read_only

    root, run_id = run
    ro = tmp_path / "ro"
    shutil.copytree(root, ro)
    for f in (ro / "candidates").glob("index.sqlite*"):
        f.unlink()  # and no index: built in memory from the files
    out = tmp_path / "page.html"
    r = _read_only(ro, "report", run_id, "--root", str(ro), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 1_000_000 and not list((ro / "candidates").glob("index.sqlite*"))


def test_a_run_with_energy_gets_an_energy_chart_beside_its_clocks(run) -> None:
    """The recorded run's timings as a GPU with NVML would have given them (energy per call on every correct one)."""
    from agent.view.report import render_report, report_input

    root, run_id = run
    with Store(root) as s:
        data = report_input(s, run_id)
    for n, c in enumerate(data.candidates):
        t = c.result.timing
        if t is not None:
            c.result.timing = t.model_copy(update={"energy_mj": 50.0 - n, "energy_spread_pct": 1.0, "energy_note": "",
                                                   "eager_energy_mj": 600.0, "compile_energy_mj": 200.0})
    html = render_report(data)
    assert 'id="chart-energy"' in html and "energy: not measured" not in html
    assert "eager 600 mJ" in html and "torch.compile 200 mJ" in html  # the baselines' lines, named


# ---------------------------------------------------------------- what a reader of the page needs (issue 33)

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


def test_roofline_points_carry_numbers_that_avoid_each_other_and_the_table_names_the_kernels(gpu_page) -> None:
    fig = _figure(gpu_page, "chart-roofline")
    points = [t for t in fig["data"] if t.get("mode") == "markers+text"]
    labels = [(x, y, text, spot) for t in points
              for x, y, text, spot in zip(t["x"], t["y"], t["text"], t["textposition"])]
    assert sorted(text for _, _, text, _ in labels) == ["1", "2", "3", "4"]  # numbers, not kernel names
    at: dict[tuple[float, float], list[str]] = {}
    for x, y, _, spot in labels:
        at.setdefault((round(x, 6), round(y, 3)), []).append(spot)
    [same] = [spots for spots in at.values() if len(spots) > 1]
    assert len(same) == 2 and same[0] != same[1]  # one kernel profiled twice: its two numbers on two sides
    assert any("★ the best" in t["name"] for t in points)
    table = gpu_page[gpu_page.index('id="roofline-kernels"'):]
    table = table[:table.index("</table>")]
    assert table.count('<td class="kernel">gap_row_kernel</td>') == 2 and "fused_multiply_gap_kernel_optimized" in table
    assert "<th>#</th>" in table and '<td class="num">4</td>' in table


def test_label_spots_give_coincident_points_different_sides_and_a_lone_point_the_top() -> None:
    from agent.view.report_charts import label_spots

    assert label_spots([(0.26, 768.0)], (-2, 3), (1, 5)) == ["top center"]
    spots = label_spots([(0.26, 768.0)] * 5, (-2, 3), (1, 5))
    assert len(set(spots)) == 5
    far = label_spots([(0.01, 10.0), (1000.0, 1e5)], (-2, 3), (1, 5))
    assert far == ["top center", "top center"]


def test_each_new_best_shows_the_metrics_that_moved_most_with_units_and_folds_the_rest(page) -> None:
    _, html = page
    section = html[html.index("2. <code>"):html.index('id="stages"')]
    top = section[:section.index('<details class="metrics-rest">')]
    rows = top.count("<tr>") - 1 - top.count("<th></th>")  # less the header rows (the clocks' and the metrics')
    assert 3 <= rows - 3 <= 8  # the three clock rows, then at most eight metrics
    assert "<td class=\"num\">685.8 µs</td><td class=\"num\">181.6 µs</td><td class=\"num\">-73.5 %</td>" in top
    assert 'title="dram__throughput.avg.pct_of_peak_sustained_elapsed">DRAM throughput</td>' in top
    assert "+65.1 pts" in top and "2,048 blocks" in top
    assert ">smsp__" not in section and ">launch__" not in section  # ncu's raw names only in the tooltips
    rest = section[section.index('<details class="metrics-rest">'):]
    assert "the other 53 metrics" in rest and "stall: long scoreboard" in rest and "cycles/issue" in rest
    assert "536.9 MB" in rest  # DRAM read, in the best's profile only


def _log_axes(fig: dict) -> list[dict]:
    return [v for k, v in fig["layout"].items() if k.startswith(("xaxis", "yaxis")) and v.get("type") == "log"]


def _number(label: str) -> float:
    scale = {"k": 1e3, "M": 1e6, "G": 1e9}
    return float(label[:-1]) * scale[label[-1]] if label[-1] in scale else float(label)


@pytest.mark.parametrize("which", ["page", "gpu_page"])
def test_every_log_axis_labels_its_ticks_with_the_numbers_they_stand_for(which, request) -> None:
    got = request.getfixturevalue(which)
    html = got[1] if isinstance(got, tuple) else got
    from agent.view.report import CHART_IDS

    axes = [a for c in CHART_IDS if f'id="{c}"' in html for a in _log_axes(_figure(html, c))]
    assert len(axes) >= 4  # both progress charts' y, the roofline's x and y
    for axis in axes:
        assert axis["tickmode"] == "array" and len(axis["tickvals"]) >= 2
        for value, label in zip(axis["tickvals"], axis["ticktext"]):
            assert _number(label) == pytest.approx(value, rel=1e-9), (label, value)


def test_tick_labels_and_values() -> None:
    from agent.view.report_charts import log_ticks, tick_label

    assert [tick_label(v) for v in (0.2, 2, 20, 2000, 20000, 1.5e6)] == ["0.2", "2", "20", "2k", "20k", "1.5M"]
    assert [tick_label(v) for v in log_ticks([0.2, 60], 280, 24)] == ["0.2", "0.5", "1", "2", "5", "10", "20", "50"]
    narrow = log_ticks([1.39, 1.92], 280, 24)  # a fraction of a decade: round values, not one lonely '2'
    assert len(narrow) >= 4 and all(1.3 <= v <= 2.0 for v in narrow)
    assert len(log_ticks([0.0321, 0.0323], 280, 24)) == 2


def _stop(root: Path, run_id: str, status: str, finished: bool, pid: int | None = None) -> None:
    """Leave the recorded run's files as a stop would: its status, and its last iteration begun, not complete."""
    import json
    import socket

    run_json = root / "candidates" / run_id / "run.json"
    record = json.loads(run_json.read_text())
    record.update(status=status, pid=pid or record["pid"], host=socket.gethostname())
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
    assert "2 of 3 done (i1–i2), i3 cut short after 3 candidates; i0 judged the starting kernel · 10 candidates" in html
    bars = [t["x"] for t in _figure(html, "chart-verdicts")["data"]][0]
    assert bars == ["i0 start", "i1 memory-fusion", "i2 memory-fusion", "i3 parallelism (cut short)"]


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


def test_a_finished_run_has_no_stop_box_and_cpu_speedups_are_not_given(page) -> None:
    _, html = page
    assert 'id="stopped"' not in html and "agent run --resume" not in html
    assert "speedups n/a (CPU mode)" in html and "0.01× eager" not in html
    assert "3 of 3 done (i1–i3); i0 judged the starting kernel · 10 candidates" in html


def test_the_verdict_chart_has_a_colour_legend_even_for_one_verdict(run, tmp_path) -> None:
    """A run whose every candidate was correct draws one bar colour: the legend still says what it means."""
    from agent.view.report import render_report, report_input

    chromium = _chromium()
    root, run_id = run
    with Store(root) as s:
        data = report_input(s, run_id)
    data.candidates = [c for c in data.candidates if c.result.verdict == "correct"]
    path = tmp_path / "run.html"
    path.write_text(render_report(data), encoding="utf-8")
    dom = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          path.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    charts = _Charts(("chart-verdicts",))
    charts.feed(dom.stdout)
    inside = charts.found["chart-verdicts"]
    assert sum(e.startswith("g.trace bars") for e in inside) == 1
    assert any(e.startswith("g.legend") for e in inside) and any(e.startswith("g.legendtitletext")
                                                                 or "legendtitle" in e for e in inside)


def test_the_page_is_about_four_thousand_pixels_tall_at_1400_wide(page, tmp_path) -> None:
    """Each new best's table of every raw metric and an open side-by-side rewrite made the page 7,700 px tall at
    1,400 px wide (11,300 for a five-iteration H200 run): what changed is shown, the rest folded."""
    chromium = _chromium()
    path, html = page
    probe = tmp_path / "probe.html"  # the page, writing its own height into the DOM once its charts have drawn
    probe.write_text(html + '<script>window.addEventListener("load", () => setTimeout(() => document.body'
                     '.setAttribute("data-height", document.documentElement.scrollHeight), 300));</script>')
    dom = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                          "--window-size=1400,1000", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    import re

    height = int(re.search(r'data-height="(\d+)"', dom.stdout).group(1))
    assert 3000 < height < 5000, height
