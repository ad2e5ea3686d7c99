"""What the loop asks of its observers: the metrics it updates and the health it reports (typed, no import up).

The daemon's ``daemon.metrics.Metrics`` and ``daemon.health.HealthState``
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
    """A histogram fed a whole array at once (``daemon.metrics.BulkHistogram``)."""

    def observe_many(self, values: np.ndarray) -> None: ...


class LoopMetrics(Protocol):
    """The metrics the loop updates per batch and per commit (names as in ``daemon.metrics.Metrics``)."""

    records_in: CounterLike
    records_embedded: CounterLike
    records_failed: CounterLike
    dead_letters: CounterLike
    flags: CounterLike
    quarantined_batches: CounterLike
    checkpoints: CounterLike
    files_written: CounterLike
    batch_seconds: HistogramLike
    latency: BulkHistogramLike
    relative_unexplained: BulkHistogramLike
    last_batch: GaugeLike


class Health(Protocol):
    """What ``/healthz`` and ``/readyz`` are told: liveness beats, the loop's state, named problems."""

    def beat(self) -> None: ...

    def set_state(self, state: str) -> None: ...

    def set_problem(self, name: str, problem: str | None) -> None: ...
