"""Prometheus metrics of the engine, on one explicit :class:`CollectorRegistry`.

Per-object histograms (latency, relative unexplained) are fed a whole batch
at once through :class:`BulkHistogram` (``np.searchsorted`` + ``bincount``)
instead of one ``observe`` call per object.
"""

from __future__ import annotations

import threading
from typing import Iterable, Sequence

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from streamembed.stream.records import REASONS

__all__ = ["BulkHistogram", "Metrics", "LATENCY_BUCKETS", "RATIO_BUCKETS", "BATCH_BUCKETS"]

#: seconds, event_time -> processed_at
LATENCY_BUCKETS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
#: unexplained / beta, a ratio in [0, 1]
RATIO_BUCKETS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
#: seconds per batch
BATCH_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)


class BulkHistogram(Collector):
    """A label-free histogram that observes whole arrays at once.

    Exposed exactly like a prometheus-client ``Histogram`` (cumulative
    ``_bucket{le}``, ``_count``, ``_sum``). NaN values are ignored.
    """

    def __init__(self, name: str, documentation: str, buckets: Sequence[float],
                 registry: CollectorRegistry | None = None) -> None:
        self.name = name
        self.documentation = documentation
        self.bounds = np.asarray(sorted(buckets), dtype=np.float64)
        self._counts = np.zeros(self.bounds.size + 1, dtype=np.int64)  # last: +Inf
        self._sum = 0.0
        self._lock = threading.Lock()
        if registry is not None:
            registry.register(self)

    def observe_many(self, values: np.ndarray) -> None:
        """Observe every finite-or-infinite, non-NaN value of ``values``."""
        v = np.asarray(values, dtype=np.float64).ravel()
        v = v[~np.isnan(v)]
        if v.size == 0:
            return
        idx = np.searchsorted(self.bounds, v, side="left")  # bucket i holds v <= bounds[i]
        counts = np.bincount(idx, minlength=self._counts.size)
        with self._lock:
            self._counts += counts
            self._sum += float(v.sum())

    def collect(self) -> Iterable[HistogramMetricFamily]:
        with self._lock:
            cum = np.cumsum(self._counts)
            total = float(self._sum)
        buckets = [(floatToGoString(b), float(c)) for b, c in zip(self.bounds, cum[:-1])]
        buckets.append(("+Inf", float(cum[-1])))
        fam = HistogramMetricFamily(self.name, self.documentation, buckets=buckets, sum_value=total)
        yield fam

    def describe(self) -> Iterable[HistogramMetricFamily]:
        yield HistogramMetricFamily(self.name, self.documentation)


class Metrics:
    """Every metric the engine exports, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.records_in = Counter("streamembed_records_in_total",
                                  "Input records read (rows, plus undecodable lines and unreadable files).",
                                  registry=r)
        self.records_embedded = Counter("streamembed_records_embedded_total",
                                        "Records embedded and written to the output, by method.",
                                        ["method"], registry=r)
        self.records_failed = Counter("streamembed_records_failed_total",
                                      "Records refused, by reason (each also becomes a dead letter).",
                                      ["reason"], registry=r)
        for reason in REASONS:
            self.records_failed.labels(reason=reason)
        self.dead_letters = Counter("streamembed_dead_letters_total", "Dead letters written.", registry=r)
        self.flags = Counter("streamembed_flags_total", "Embedded records carrying each flag.", ["flag"],
                             registry=r)
        self.batch_seconds = Histogram("streamembed_batch_processing_seconds",
                                       "Wall time to decode, embed and encode one batch.",
                                       buckets=BATCH_BUCKETS, registry=r)
        self.latency = BulkHistogram("streamembed_end_to_end_latency_seconds",
                                     "Per record, processed_at - event_time (records with an event_time).",
                                     LATENCY_BUCKETS, registry=r)
        self.relative_unexplained = BulkHistogram("streamembed_relative_unexplained",
                                                  "Per record, unexplained / beta (0 = fully on the map).",
                                                  RATIO_BUCKETS, registry=r)
        self.model_version = Gauge("streamembed_model_version", "Version of the model in use.", registry=r)
        self.model_info = Info("streamembed_model", "The model in use.", registry=r)
        self.last_batch = Gauge("streamembed_last_batch_timestamp_seconds",
                                "Unix time at which the last batch finished.", registry=r)
        self.checkpoints = Counter("streamembed_checkpoints_total", "Checkpoints committed.", registry=r)
        self.files_written = Counter("streamembed_output_files_total", "Output and dead-letter files published.",
                                     ["kind"], registry=r)
