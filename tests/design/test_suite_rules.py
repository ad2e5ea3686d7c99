"""Rules of the test suite itself: every test has a deadline, the markers are declared."""

from __future__ import annotations

import pytest


def test_every_test_has_a_deadline(request: pytest.FixtureRequest) -> None:
    """pytest-timeout is active with a positive default (pyproject's ``timeout``): a wedged broker, daemon or
    thread fails its test with a traceback instead of hanging the run."""
    assert request.config.pluginmanager.hasplugin("timeout")
    assert float(request.config.getini("timeout")) > 0


def test_the_selection_markers_are_declared(request: pytest.FixtureRequest) -> None:
    declared = {line.split(":")[0].strip() for line in request.config.getini("markers")}
    assert {"slow", "e2e", "broker"} <= declared
