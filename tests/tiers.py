"""The quick tier: `python -m pytest --quick` runs every test but those recorded as slow (README).

A test is slow when a full run recorded it (setup, call and teardown) at QUICK_S or more, or when it uses a fixture
recorded at QUICK_S or more to set up (a module's one evaluation of the whole adversarial suite is charged to the
first test that asks for it; without this, --quick would move it to the next one). Tests marked `slow` are left out
too. A test the record does not know (a new one) runs: the tier errs towards running.

Record with a full run: `python -m pytest -q -n 2 --dist loadfile --record-durations tests/durations.json`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator
from pathlib import Path

import pytest

QUICK_S = 1.0
RECORD = Path(__file__).with_name("durations.json")
_FIXTURES = pytest.StashKey[dict[str, float]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tiers")
    group.addoption("--quick", action="store_true",
                    help=f"leave out the tests {RECORD.name} records as slow (>= {QUICK_S:g} s, or a fixture that "
                         "slow) and those marked slow")
    group.addoption("--record-durations", metavar="PATH", default=None,
                    help="write each test's duration and its fixtures' set-up times to PATH (JSON)")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("record_durations")
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Recorder(Path(path)), "tiers-recorder")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> Generator[None, None, None]:
    start = time.perf_counter()
    yield
    took = time.perf_counter() - start
    item = getattr(request, "_pyfuncitem", None)
    if item is not None:
        times = item.stash.setdefault(_FIXTURES, {})
        times[fixturedef.argname] = times.get(fixturedef.argname, 0.0) + took


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator[None, None, None]:
    outcome = yield
    if call.when == "setup" and item.config.getoption("record_durations"):
        report = outcome.get_result()
        report.user_properties.append(("fixture_setup_s", item.stash.get(_FIXTURES, {})))


class Recorder:
    """On the controller (xdist sends the workers' reports there): each test's phases added up, and the longest
    set-up of each fixture; written at the session's end."""

    def __init__(self, path: Path) -> None:
        self.path, self.tests, self.fixtures = path, dict[str, float](), dict[str, float]()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.tests[report.nodeid] = self.tests.get(report.nodeid, 0.0) + report.duration
        for name, value in report.user_properties:
            if name == "fixture_setup_s":
                for fixture, secs in value.items():
                    self.fixtures[fixture] = max(self.fixtures.get(fixture, 0.0), secs)

    def pytest_sessionfinish(self) -> None:
        data = {"quick_s": QUICK_S, "tests": {k: round(v, 3) for k, v in sorted(self.tests.items())},
                "fixtures": {k: round(v, 3) for k, v in sorted(self.fixtures.items())}}
        self.path.write_text(json.dumps(data, indent=1) + "\n")


def quick_deselect(config: pytest.Config, items: list[pytest.Item]) -> list[pytest.Item]:
    """The items --quick leaves out (none without --quick)."""
    if not config.getoption("quick"):
        return []
    try:
        data = json.loads(RECORD.read_text())
    except (OSError, ValueError):
        data = {"tests": {}, "fixtures": {}}
    slow_tests = {k for k, v in data["tests"].items() if v >= QUICK_S}
    slow_fixtures = {k for k, v in data["fixtures"].items() if v >= QUICK_S}
    return [i for i in items if i.get_closest_marker("slow") or i.nodeid in slow_tests
            or slow_fixtures.intersection(getattr(i, "fixturenames", ()))]
