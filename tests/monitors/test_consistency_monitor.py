"""The input consistency monitor (stream/consistency.py, docs/math.md §4.5) on real data, in process.

Rows whose columns follow another landmark order (ascending ids, shuffled, reversed, another model's or another
dataset's landmarks) used to be embedded silently: no dead letter, no metric, nothing in the log. Now each mix-up
raises, within 2,000 objects, a WARNING, the streamembed_input_consistency_alarm gauge and a /readyz problem, on
Euclidean data (scikit-learn digits) and on edit distances (stdlib docstrings); rows in model order never do.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from streamembed.core.monitor import consistency as core_consistency
from streamembed.core.model import fit_model
from streamembed.ops.health import HealthState
from streamembed.ops.metrics import Metrics
from benchmarks.mixups import MIXUPS
from streamembed.monitors.consistency import HEALTH_PROBLEM, ConsistencyMonitor
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.registry import ModelRegistry
from streamembed.stream.origin import RowOrigin

from ..realdata import setting
from tests.stream.helpers import fitted, input_table, list_column, objects

BATCH = 250


class Watch:
    """A BatchEmbedder with a consistency monitor, its metrics and its health, fed batches of rows."""

    def __init__(self, model: Any, registry: ModelRegistry | None = None) -> None:
        self.metrics = Metrics()
        self.health = HealthState()
        self.health.model_loaded, self.health.state = True, "running"
        self.monitor = ConsistencyMonitor(metrics=self.metrics, health=self.health)
        # rows that state no version follow the newest (docs/objects.md: the operator's refit.unversioned_rows)
        self.embedder = BatchEmbedder(model, registry=registry, consistency=self.monitor,
                                      unversioned_rows=2)
        self.seen = 0
        self.alarm_at: int | None = None

    def feed(self, rows: np.ndarray, count: int, rng: np.random.Generator) -> None:
        """``count`` objects resampled from ``rows``, in batches of BATCH; notes when the alarm is first up."""
        for start in range(0, count, BATCH):
            A = rows[rng.integers(0, rows.shape[0], min(BATCH, count - start))]
            t = pa.table({"id": pa.array([f"o{self.seen + i}" for i in range(A.shape[0])]),
                          "dissimilarities": list_column(A)})
            p = self.embedder.process(t, origin=RowOrigin("in.parquet"))
            assert p.n_out == A.shape[0] and not p.dead  # the monitor never costs a record
            self.seen += A.shape[0]
            if self.monitor.alarm and self.alarm_at is None:
                self.alarm_at = self.seen

    def gauge(self, name: str) -> float:
        return float(getattr(self.metrics, name)._value.get())


def _loud(name: str, case: str, caplog: pytest.LogCaptureFixture) -> None:
    s = setting(name, 100, "random")
    rng = np.random.default_rng(0)
    w = Watch(s.model)
    with caplog.at_level(logging.WARNING, logger="streamembed.consistency"):
        w.feed(s.rows["model order"], 3000, rng)
        assert w.alarm_at is None and w.monitor.value > 0.8 and w.health.ready()[0]
        assert not [r for r in caplog.records if r.name == "streamembed.consistency"]
        w.feed(s.rows[case], 2000, rng)
    assert w.alarm_at is not None and w.alarm_at - 3000 <= 2000, (case, w.monitor.value)
    warnings = [r for r in caplog.records if r.name == "streamembed.consistency" and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "another landmark order" in warnings[0].getMessage()
    assert w.gauge("input_consistency_alarm") == 1.0 and w.gauge("input_consistency") < 0.5
    assert w.metrics.input_consistency_alarms._value.get() == 1
    ready, doc = w.health.ready()
    assert not ready and "another landmark order" in doc["problems"][HEALTH_PROBLEM]


@pytest.mark.parametrize("case", MIXUPS)
def test_mixups_are_loud_within_2000_objects_on_digits(case: str, caplog: pytest.LogCaptureFixture) -> None:
    _loud("digits", case, caplog)


@pytest.mark.slow
@pytest.mark.parametrize("case", MIXUPS)
def test_mixups_are_loud_within_2000_objects_on_edit_distances(case: str, caplog: pytest.LogCaptureFixture) -> None:
    _loud("docstrings", case, caplog)


@pytest.mark.parametrize("case", ["shuffled", "ascending ids"])
def test_a_stream_mixed_up_from_its_first_row_is_loud_at_the_first_verdict(case: str) -> None:
    s = setting("digits", 100, "maxmin")
    w = Watch(s.model)
    w.feed(s.rows[case], 2000, np.random.default_rng(1))
    assert w.alarm_at is not None and w.alarm_at <= 2 * BATCH  # min_objects = 200 scored rows


def test_rows_in_model_order_never_alarm_and_the_alarm_clears_when_they_come_back() -> None:
    s = setting("digits", 100, "random")
    rng = np.random.default_rng(2)
    w = Watch(s.model)
    w.feed(s.rows["model order"], 20_000, rng)
    assert w.alarm_at is None and w.monitor.alarms == 0 and 0.8 < w.monitor.value < 1.3
    w.feed(s.rows["reversed"], 1500, rng)
    assert w.monitor.alarm
    w.feed(s.rows["model order"], 2000, rng)
    assert not w.monitor.alarm and w.gauge("input_consistency_alarm") == 0.0 and w.health.ready()[0]
    assert w.monitor.first_alarm is not None and w.monitor.alarms == 1


def test_a_new_model_starts_a_new_window() -> None:
    s = setting("digits", 100, "random")
    rng = np.random.default_rng(3)
    reg = ModelRegistry(s.model, retain=1)
    w = Watch(s.model, reg)
    w.feed(s.rows["shuffled"], 1000, rng)
    assert w.monitor.alarm
    reg.install(s.model.with_version(2))
    w.feed(s.rows["model order"], 100, rng)  # fewer than min_objects: no verdict yet on the new model
    assert not w.monitor.alarm and math.isnan(w.monitor.value) and w.health.ready()[0]


def test_feature_rows_are_not_scored() -> None:
    model = fitted(features=True)
    w = Watch(model)
    t = pa.table({"id": [f"f{i}" for i in range(500)], "features": list_column(objects(500))})
    assert w.embedder.process(t).n_out == 500
    assert w.monitor.window == 0 and math.isnan(w.gauge("input_consistency"))


def test_landmarks_too_alike_to_tell_an_order_turn_the_check_off(caplog: pytest.LogCaptureFixture) -> None:
    n = 9
    model = fit_model(1.0 - np.eye(n), n_components=2)  # a regular simplex
    w = Watch(model)
    with caplog.at_level(logging.INFO, logger="streamembed.consistency"):
        w.embedder.process(input_table([f"r{i}" for i in range(300)],
                                       np.random.default_rng(0).uniform(0.5, 1.5, (300, n)).astype(np.float32)))
    assert math.isnan(w.monitor.value) and not w.monitor.alarm
    assert any("not checked" in r.getMessage() for r in caplog.records)


def test_a_failing_score_never_costs_the_batch(monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    def broken(self: Any, A: np.ndarray) -> np.ndarray:
        raise MemoryError("no room to score")

    monkeypatch.setattr(core_consistency.ProfileCheck, "shares", broken)
    w = Watch(fitted())
    from tests.stream.helpers import dissimilarities
    with caplog.at_level(logging.WARNING, logger="streamembed.consistency"):
        for _ in range(3):
            p = w.embedder.process(input_table([f"r{i}" for i in range(50)], dissimilarities(objects(50))))
            assert p.n_out == 50 and not p.dead
    assert len([r for r in caplog.records if "scoring a batch failed" in r.getMessage()]) == 1


@pytest.mark.parametrize("scale", ["x10", "squared"])
def test_a_file_of_three_rows_in_other_units_raises_the_alarm(scale: str) -> None:
    """Rows multiplied by 10 or squared (digits, Euclidean) are flagged implausible_scale / negative_unexplained and,
    from three such rows on, alarm like a mixed-up order does (docs/math.md §4.8); correct rows never do."""
    s = setting("digits", 100, "random")
    rows = s.rows["model order"]
    w = Watch(s.model)
    w.feed(rows, 1000, np.random.default_rng(1))
    assert not w.monitor.alarm and w.monitor.implausible_share == 0.0
    fresh = Watch(s.model)
    bad = 10.0 * rows[:3] if scale == "x10" else np.square(rows[:3])
    fresh.feed(bad, 3, np.random.default_rng(2))
    assert fresh.monitor.alarm and "input rows cannot be right" in (fresh.monitor.alarm_text or "")
    assert fresh.gauge("input_consistency_alarm") == 1.0
