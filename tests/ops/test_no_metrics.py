"""``ops.no_metrics``: the daemon without metrics updates the same names as with them, and nothing happens."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streamembed.ops.metrics import DRIFT_GAUGES, Metrics
from streamembed.ops.no_metrics import METRIC_NAMES, NoMetrics

#: The calls the engine makes on a metric (stream/contracts.py, the drift monitor, the refits, the Kafka client).
CALLS = ("inc", "set", "observe", "observe_many", "labels", "info", "remove", "clear")


def test_the_names_are_those_of_the_prometheus_metrics() -> None:
    real = Metrics(CollectorRegistry())
    assert set(METRIC_NAMES) == set(vars(real)) - {"registry"}
    off = NoMetrics()
    assert {n for n in vars(off)} == set(METRIC_NAMES)


def test_every_call_the_engine_makes_is_a_no_op() -> None:
    real, off = Metrics(CollectorRegistry()), NoMetrics()
    for name in METRIC_NAMES:
        if name == "drift":
            continue
        metric = getattr(real, name)
        missing = [c for c in CALLS if hasattr(metric, c) and not hasattr(getattr(off, name), c)]
        assert not missing, (name, missing)
    off.records_failed.labels(reason="x").inc()
    off.kafka_consumer_lag.labels(topic="t", partition="0").set(3.0)
    off.kafka_consumer_lag.remove("t", "0")
    off.latency.observe_many(np.arange(3.0))
    off.model_info.info({"lineage": "x"})
    for statistic in DRIFT_GAUGES:
        off.drift[statistic].set(1.0)
    assert off.registry is None


def test_an_unknown_name_is_an_error_not_a_silent_no_op() -> None:
    with pytest.raises(AttributeError):
        NoMetrics().records_inn.inc()  # type: ignore[attr-defined]
