"""A real daemon (embedded default) running while the deploy tests need it, and one scrape of it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Iterator

import pytest

from ..e2e.daemon import Daemon, wait_for
from .helpers import Family, parse_exposition

#: Flags for a bounded run (~5 minutes at most) of the embedded default that
#: exercises as many series as possible: quick commits (output files,
#: checkpoints), drift monitoring on, with its refit-trigger baseline taken
#: after 8,192 objects (the least the calibrated CUSUM accepts) instead of 20,000, so the threshold is known.
DAEMON_ARGS = ("--max-batches", "1500", "--set", "output.roll_seconds=0.5", "--set", "drift.enabled=true",
               "--set", "drift.baseline_objects=8192")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs the running daemon is an e2e test (``-m "not e2e"`` leaves them out)."""
    for item in items:
        if {"live_daemon", "live_scrape"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


@dataclass
class Scrape:
    text: str
    families: dict[str, Family]


def _trigger_level(d: Daemon) -> float:
    _, text = d.get("/metrics")
    fams = parse_exposition(text)
    samples = fams["streamembed_refit_trigger_level"].samples
    return samples[0][2] if samples else math.nan


@pytest.fixture(scope="package")
def live_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """`streamembed run` once it has embedded, committed, observed latencies and knows its drift baseline."""
    workdir = tmp_path_factory.mktemp("daemon")
    d = Daemon(workdir, {}, DAEMON_ARGS)
    try:
        d.wait_port()
        wait_for(lambda: d.dead() or (d.metric("streamembed_checkpoints_total") > 0
                                      and d.metric("streamembed_end_to_end_latency_seconds_count") > 0
                                      and math.isfinite(_trigger_level(d))),
                 30, "the first checkpoint and the drift baseline", d)
        assert not d.dead(), f"daemon exited early ({d.proc.returncode}):\n{d.log()}"
        yield d
        assert not d.dead(), f"daemon exited before the tests ended ({d.proc.returncode}):\n{d.log()}"
        assert d.terminate() == 0, d.log()
    finally:
        d.close()


@pytest.fixture(scope="package")
def live_scrape(live_daemon: Daemon) -> Scrape:
    status, text = live_daemon.get("/metrics")
    assert status == 200, text
    return Scrape(text, parse_exposition(text))
