"""`agent report`'s charts (agent.view.report_charts) as a reader sees them: roofline points numbered as in the table
below the chart, their numbers kept apart; every log axis labelled with the numbers its ticks stand for; the
verdict chart's colour legend."""

from __future__ import annotations

import subprocess

import pytest
from test_report import CHROMIUM_FLAGS, _Charts, _chromium, page, run  # noqa: F401 (fixtures)
from test_report_summary import _figure, gpu_page, gpu_run  # noqa: F401 (fixtures)

from agent.store import Store

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
