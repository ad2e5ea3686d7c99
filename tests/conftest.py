"""Fixtures for every test."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def _streamembed_logs_reach_caplog(monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon's logging setup (run in process by earlier tests) stops "streamembed" from propagating;
    caplog listens at the root, so every test gets propagation back for its duration."""
    monkeypatch.setattr(logging.getLogger("streamembed"), "propagate", True)
