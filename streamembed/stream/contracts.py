"""What the loop asks of its observers: the metrics it updates and the health it reports (typed, no import up).

The daemon's ``ops.metrics.Metrics`` and ``ops.health.HealthState``
satisfy these protocols; ``embed`` and the tests pass neither (None).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

__all__ = ["Health", "LoopMetrics", "CounterLike", "GaugeLike", "HistogramLike", "BulkHistogramLike"]


class CounterLike(Protocol):
    """A (labelled) Prometheus counter."""

    def inc(self, amount: float = 1) -> None: ...

    def labels(self, *values: str, **labels: str) -> CounterLike: ...


class GaugeLike(Protocol):
    def set(self, value: float) -> None: ...


class HistogramLike(Protocol):
    def observe(self, amount: float) -> None: ...


class BulkHistogramLike(Protocol):
    """A histogram fed a whole array at once (``ops.metrics.BulkHistogram``)."""

    def observe_many(self, values: np.ndarray) -> None: ...


class LoopMetrics(Protocol):
    """The metrics the loop updates per batch and per commit (names as in ``ops.metrics.Metrics``)."""

    # read-only members: the daemon's metrics are prometheus_client objects, which these protocols describe
    @property
    def records_in(self) -> CounterLike: ...

    @property
    def records_embedded(self) -> CounterLike: ...

    @property
    def records_failed(self) -> CounterLike: ...

    @property
    def dead_letters(self) -> CounterLike: ...

    @property
    def flags(self) -> CounterLike: ...

    @property
    def quarantined_batches(self) -> CounterLike: ...

    @property
    def checkpoints(self) -> CounterLike: ...

    @property
    def files_written(self) -> CounterLike: ...

    @property
    def batch_seconds(self) -> HistogramLike: ...

    @property
    def latency(self) -> BulkHistogramLike: ...

    @property
    def relative_unexplained(self) -> BulkHistogramLike: ...

    @property
    def last_batch(self) -> GaugeLike: ...


class Health(Protocol):
    """What ``/healthz`` and ``/readyz`` are told: liveness beats, the loop's state, named problems."""

    def beat(self) -> None: ...

    def set_state(self, state: str) -> None: ...

    def set_problem(self, name: str, problem: str | None) -> None: ...
