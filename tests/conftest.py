"""Fixtures for every test."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def _streamembed_logs_reach_caplog(monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon's logging setup (run in process by earlier tests) stops "streamembed" from propagating;
    caplog listens at the root, so every test gets propagation back for its duration."""
    monkeypatch.setattr(logging.getLogger("streamembed"), "propagate", True)



def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``-n 2 --dist loadgroup``, README's suite command) every broker test goes to one
    worker, which starts the session's one broker; the other tests share the other workers."""
    group = pytest.mark.xdist_group("broker")
    for item in items:
        if item.get_closest_marker("broker") is not None:
            item.add_marker(group)


#: An unmarked test slower than this is listed at the end of the run: mark it ``slow`` (or make it faster).
SLOW_SECONDS = 5.0
_unmarked_slow: list[tuple[str, float]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.duration > SLOW_SECONDS and "slow" not in report.keywords:
        _unmarked_slow.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Lists the unmarked tests that took more than SLOW_SECONDS (a report, not a failure: wall time
    depends on the machine's load)."""
    if _unmarked_slow:
        terminalreporter.section(f"unmarked tests over {SLOW_SECONDS:.0f} s (mark them slow)")
        for nodeid, seconds in sorted(_unmarked_slow, key=lambda t: -t[1]):
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}")
