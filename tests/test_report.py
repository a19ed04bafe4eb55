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
    # 55 since issue 37: the per-SM program limit (a device attribute) and the instruction count the diagnosis reads
    assert "the other 55 metrics" in rest and "stall: long scoreboard" in rest and "cycles/issue" in rest
    assert "536.9 MB" in rest  # DRAM read, in the best's profile only


def test_a_finished_run_has_no_stop_box_and_cpu_speedups_are_not_given(page) -> None:
    _, html = page
    assert 'id="stopped"' not in html and "agent run --resume" not in html
    assert "speedups n/a (CPU mode)" in html and "0.01× eager" not in html
    assert "3 of 3 done (i1–i3); i0 judged the starting kernel · 10 candidates" in html


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
