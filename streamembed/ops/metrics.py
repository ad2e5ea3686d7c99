"""Prometheus metrics of the engine, on one explicit :class:`CollectorRegistry`.

Per-object histograms (latency, relative unexplained) are fed a whole batch
at once through :class:`BulkHistogram` (``np.searchsorted`` + ``bincount``)
instead of one ``observe`` call per object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, PlatformCollector, ProcessCollector
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from streamembed.core.flags import FLAG_NAMES
from streamembed.core.monitor.triggers import TRIGGERS
from streamembed.core.place.methods import output_methods
from streamembed.stream.records import REASONS

__all__ = ["BulkHistogram", "Metrics", "LATENCY_BUCKETS", "MAX_BUCKET_RATIO", "RATIO_BUCKETS", "BATCH_BUCKETS",
           "EMBED_METHODS", "OUTPUT_FILE_KINDS", "READ_RETRY_REASONS", "MODEL_SKIP_REASONS"]

#: Prometheus' own rendering of a bucket bound ("0.5", "1.0", "+Inf"); prometheus_client is untyped.
_go_string: Callable[[float], str] = floatToGoString
#: seconds, event_time -> processed_at: 1 ms to 10 min, each bound at most 2.5 times the one before (1-2.5-5 per
#: decade), so ``histogram_quantile`` is off by less than that factor anywhere in the range (a failover's minute
#: included; tests/deploy/test_prometheus_rules.py checks it with promtool)
LATENCY_BUCKETS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25,
                                      60, 120, 300, 600)
#: The widest ratio between consecutive latency bounds.
MAX_BUCKET_RATIO = 2.5
#: unexplained / beta, a ratio in [0, 1]
RATIO_BUCKETS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
#: seconds per batch
BATCH_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
#: ``method`` values of streamembed_records_embedded_total: every placement method (core.place.methods), block RR too.
EMBED_METHODS: tuple[str, ...] = output_methods()
#: ``reason`` values of streamembed_model_records_skipped_total (``kafka.model_topic``).
MODEL_SKIP_REASONS: tuple[str, ...] = ("headers", "size", "checksum", "invalid")
#: ``kind`` values of streamembed_output_files_total.
OUTPUT_FILE_KINDS: tuple[str, ...] = ("output", "dead_letter")
#: ``reason`` values of streamembed_read_retries_total present from the start (any other errno name may follow).
READ_RETRY_REASONS: tuple[str, ...] = ("EACCES", "EPERM", "EIO")


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
        buckets = [(_go_string(b), float(c)) for b, c in zip(self.bounds, cum[:-1], strict=True)]
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
        # process_* (CPU seconds, resident/virtual memory bytes, open fds, start time) and python_info:
        # the default registry has these, an explicit one needs them registered.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self.records_in = Counter("streamembed_records_in_total",
                                  "Input records read (rows, plus undecodable lines and unreadable files).",
                                  registry=r)
        self.records_embedded = Counter("streamembed_records_embedded_total",
                                        "Records embedded and written to the output, by method.",
                                        ["method"], registry=r)
        for method in EMBED_METHODS:
            self.records_embedded.labels(method=method)
        self.records_failed = Counter("streamembed_records_failed_total",
                                      "Records refused, by reason (each also becomes a dead letter).",
                                      ["reason"], registry=r)
        for reason in REASONS:
            self.records_failed.labels(reason=reason)
        self.dead_letters = Counter("streamembed_dead_letters_total", "Dead letters written.", registry=r)
        self.flags = Counter("streamembed_flags_total", "Embedded records carrying each flag.", ["flag"],
                             registry=r)
        for name in FLAG_NAMES.values():
            self.flags.labels(flag=name)
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
        for kind in OUTPUT_FILE_KINDS:
            self.files_written.labels(kind=kind)
        self.read_retries = Counter("streamembed_read_retries_total",
                                    "Input files or directories that could not be read for a reason of the environment "
                                    "(permissions, I/O), by errno name; each is retried with backoff.", ["reason"],
                                    registry=r)
        for errno_name in READ_RETRY_REASONS:
            self.read_retries.labels(reason=errno_name)
        self.files_reread = Counter("streamembed_files_reread_total",
                                    "Input files read again because they changed after they were read.", registry=r)
        self.quarantined_batches = Counter("streamembed_quarantined_batches_total",
                                           "Batches set aside (their records dead-lettered) after crashing the daemon "
                                           "run.max_batch_attempts times.", registry=r)
        # Drift monitoring and refits (docs/math.md §4–5; values of the current window).
        self.drift = {
            name: Gauge(f"streamembed_drift_{name}", doc, registry=r)
            for name, doc in DRIFT_GAUGES.items()
        }
        self.drift_quantile = Gauge("streamembed_drift_relative_unexplained_quantile",
                                    "Quantiles of unexplained / beta over the drift window (ratio 0-1), "
                                    "by q (0.5, 0.9, 0.99).", ["q"], registry=r)
        self.drift_detector_statistic = Gauge("streamembed_drift_detector_statistic",
                                              "The CUSUM statistic of the drift detector (standardised units).",
                                              registry=r)
        self.drift_detector_threshold = Gauge("streamembed_drift_detector_threshold",
                                              "The CUSUM's calibrated threshold (NaN while collecting its baseline).",
                                              registry=r)
        self.drift_detector_expected_run_objects = Gauge(
            "streamembed_drift_detector_expected_run_objects",
            "The calibrated expected run between false alarms, in objects (drift.expected_run_objects).", registry=r)
        self.drift_detector_info = Gauge("streamembed_drift_detector_info",
                                         "1 for each drift detector deciding now (drift.detector's kinds; rule also "
                                         "as the cusum's fallback), 0 for the others.", ["kind"], registry=r)
        self.drift_armed = Gauge("streamembed_drift_armed",
                                 "1 while the detector decides on a calibrated baseline (from the model's fit baseline "
                                 "or the stream's), 0 while it collects one (docs/math.md 7.8).", ["kind"],
                                 registry=r)
        self.drift_arming_objects = Gauge("streamembed_drift_arming_objects",
                                          "Objects still to be seen before the detectors take the stream's own "
                                          "baseline (drift.baseline_objects after a (re)fit; 0 once taken).",
                                          registry=r)
        self.drift_member_statistic = Gauge("streamembed_drift_member_statistic",
                                            "Each drift detector's statistic (CUSUM S, standardised units).",
                                            ["kind"], registry=r)
        self.drift_member_threshold = Gauge("streamembed_drift_member_threshold",
                                            "Each drift detector's calibrated threshold (NaN while it has no "
                                            "baseline).", ["kind"], registry=r)
        self.drift_captured_share = Gauge("streamembed_drift_captured_share",
                                          "The last block's share of its best d-plane's variance that the map holds "
                                          "(0-1, docs/math.md 7.7; NaN before a block).", registry=r)
        self.drift_captured_share.set(float("nan"))
        self.drift_coverage = Gauge("streamembed_drift_coverage",
                                    "The radius's coverage on the last checked sample against its exact classical "
                                    "MDS (0-1, docs/math.md 9.6; NaN before a check: needs features or blocks).",
                                    registry=r)
        self.drift_coverage.set(float("nan"))
        self.drift_alarms = Counter("streamembed_drift_alarms_total", "Drift alarms raised by the detector.",
                                    registry=r)
        # Input consistency (docs/math.md §4.5; monitors.consistency).
        self.input_consistency = Gauge("streamembed_input_consistency",
                                       "Consistency of the recent input rows with the model's landmark order "
                                       "(docs/math.md 4.5): 1 like the landmarks' own rows, 0 like rows whose columns "
                                       "follow another order; NaN until consistency.min_objects rows are scored or "
                                       "where rows cannot be checked.", registry=r)
        self.input_consistency.set(float("nan"))
        self.input_consistency_alarm = Gauge("streamembed_input_consistency_alarm",
                                             "1 while the input consistency is below consistency.alarm_below (rows "
                                             "look like they follow another landmark order), else 0.", registry=r)
        self.input_consistency_alarms = Counter("streamembed_input_consistency_alarms_total",
                                                "Input consistency alarms raised.", registry=r)
        self.refit_trigger_value = Gauge("streamembed_refit_trigger_value",
                                         "Current value of the statistic the refit trigger watches.", registry=r)
        self.refit_trigger_level = Gauge("streamembed_refit_trigger_level",
                                         "Level above which the watched statistic counts toward a refit (NaN until "
                                         "the baseline is known).", registry=r)
        self.refits = Counter("streamembed_refits_total", "Landmark refits completed and swapped in, by trigger.",
                              ["trigger"], registry=r)
        for trigger in ("auto", "manual", "remote"):
            self.refits.labels(trigger=trigger)
        self.refits_kept = Counter("streamembed_refits_kept_total", "Refits that found no better map and kept the "
                                   "current one (nothing installed), by trigger.", ["trigger"], registry=r)
        for trigger in ("auto", "manual"):
            self.refits_kept.labels(trigger=trigger)
        self.refit_failures = Counter("streamembed_refit_failures_total", "Landmark refits that failed or were "
                                      "rejected by validation.", registry=r)
        self.refit_seconds = Histogram("streamembed_refit_duration_seconds",
                                       "Wall time of a refit: selection, eigendecomposition, alignment, persistence.",
                                       buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120), registry=r)
        self.refit_alignment_rms = Gauge("streamembed_refit_alignment_rms",
                                         "RMS distance left by the Procrustes alignment of the last refit "
                                         "(map distance units).", registry=r)
        self.refit_in_progress = Gauge("streamembed_refit_in_progress", "1 while a refit runs in the background.",
                                       registry=r)
        self.last_refit = Gauge("streamembed_last_refit_timestamp_seconds",
                                "Unix time of the last completed refit (0: none since start).", registry=r)
        self.reservoir_objects = Gauge("streamembed_refit_candidates",
                                       "Objects in the reservoir of landmark candidates.", registry=r)
        # Kafka source and sinks (streamembed.kafka); zero unless source.kind = "kafka" or output.kafka_topic is set.
        self.kafka_consumer_lag = Gauge("streamembed_kafka_consumer_lag",
                                        "Messages not yet handed to the loop: fetch high watermark - next offset, "
                                        "per assigned partition.", ["topic", "partition"], registry=r)
        self.kafka_group_lag = Gauge("streamembed_kafka_group_lag",
                                     "The consumer group's lag: end of the log - the group's committed offset, for "
                                     "every partition of the input topic, owned by this member or not (every member "
                                     "reports every partition: take the max by partition).", ["topic", "partition"],
                                     registry=r)
        self.kafka_partition_owned = Gauge("streamembed_kafka_partition_owned",
                                           "1 for each input partition this member owns, 0 for the topic's others "
                                           "(summed over the members: 0 = a partition nobody consumes).",
                                           ["topic", "partition"], registry=r)
        self.kafka_messages_in = Counter("streamembed_kafka_messages_in_total", "Kafka messages consumed.",
                                         registry=r)
        self.kafka_bytes_in = Counter("streamembed_kafka_bytes_in_total", "Bytes of Kafka message values consumed.",
                                      registry=r)
        self.kafka_messages_out = Counter("streamembed_kafka_messages_out_total",
                                          "Kafka messages produced and acknowledged, by topic (output, dead letters, "
                                          "model).", ["topic"], registry=r)
        self.kafka_produce_errors = Counter("streamembed_kafka_produce_errors_total",
                                            "Produce requests that failed (each is retried unless permanent).",
                                            registry=r)
        self.kafka_retries = Counter("streamembed_kafka_retries_total",
                                     "Kafka operations retried after a transient error.", registry=r)
        self.kafka_rebalances = Counter("streamembed_kafka_rebalances_total",
                                        "Consumer-group rebalances this member took part in.", registry=r)
        self.kafka_assigned_partitions = Gauge("streamembed_kafka_assigned_partitions",
                                               "Input partitions assigned to this member.", registry=r)
        self.kafka_paused_partitions = Gauge("streamembed_kafka_paused_partitions",
                                             "Input partitions paused because the sinks fell behind.", registry=r)
        self.model_records_skipped = Counter("streamembed_model_records_skipped_total",
                                             "Records of the model topic skipped for what they hold, by reason: "
                                             "headers (no lineage or version), size, checksum, invalid (not a "
                                             "loadable model: a decompression bomb, NaN arrays, ...).", ["reason"],
                                             registry=r)
        for skip in MODEL_SKIP_REASONS:
            self.model_records_skipped.labels(reason=skip)
        self.kafka_commits = Counter("streamembed_kafka_commits_total",
                                     "Offset commits (after the outputs of the batches were acknowledged).",
                                     registry=r)


#: streamembed_drift_<name> gauges: statistics of the current drift window.
DRIFT_GAUGES: dict[str, str] = {
    "window_objects": "Objects in the drift window.",
    "sampled_objects": "Objects of the window with an exact k0.",
    "relative_unexplained_mean": "Mean of unexplained / beta over the window (ratio 0-1).",
    "relative_k0_mean": "Mean of k0 / beta over the sampled objects (ratio).",
    "trace_k0": "Estimate of Tr(k0) over the window from the sampled rows, with every object's u as control "
                "variate (exact when every object is sampled; squared map units).",
    "trace_k0_stderr": "Sampling standard error of the trace_k0 estimate (0 when exact; squared map units).",
    "trace_k0_bound": "Upper bound of Tr(k0) over the window: the sum of u = beta - |y|^2 over every object "
                      "(any data; squared map units).",
    "norm_k0": "||k0||_2 over landmarks and window: exact when norm_k0_exact is 1 (the window is one block), "
               "else an upper bound (trace bound); NaN when k0 is not PSD (non-Euclidean; squared map units).",
    "norm_k0_exact": "1 when norm_k0 is exact (the window is one block with mutual dissimilarities), 0 when a bound.",
    "kernel_distance_bound": "Upper bound on the average kernel-distance error against a full refit, from the trace "
                             "bound; NaN when k0 is not PSD (map units).",
    "eigengap": "gamma_d - gamma_{d+1} of the Nystrom kernel over landmarks and window, estimated from the sample "
                "(squared map units).",
    "gap_ratio": "norm_k0 / eigengap (a bound when norm_k0 is): at 1 or above a refit may reorder or replace the "
                 "kept axes; NaN when k0 is not PSD.",
    "negative_k0_ratio": "Share of sampled objects with k0 negative beyond round-off (non-Euclidean input), 0-1.",
}


#: Label values shown in the reference table: (metric, label) -> the closed set, or what the values are.
LABEL_VALUES: dict[tuple[str, str], str] = {
    ("streamembed_records_failed_total", "reason"): ", ".join(REASONS),
    ("streamembed_records_embedded_total", "method"): ", ".join(EMBED_METHODS),
    ("streamembed_read_retries_total", "reason"): "errno name: " + ", ".join(READ_RETRY_REASONS) + ", ...",
    ("streamembed_refits_total", "trigger"): "auto, manual, remote",
    ("streamembed_refits_kept_total", "trigger"): "auto, manual",
    ("streamembed_output_files_total", "kind"): ", ".join(OUTPUT_FILE_KINDS),
    ("streamembed_model_records_skipped_total", "reason"): ", ".join(MODEL_SKIP_REASONS),
    ("streamembed_drift_detector_info", "kind"): ", ".join(TRIGGERS.names()),
    ("streamembed_drift_armed", "kind"): ", ".join(TRIGGERS.names()),
    ("streamembed_drift_member_statistic", "kind"): ", ".join(TRIGGERS.names()),
    ("streamembed_drift_member_threshold", "kind"): ", ".join(TRIGGERS.names()),
    ("streamembed_drift_relative_unexplained_quantile", "q"): "0.5, 0.9, 0.99",
    ("streamembed_model_info", "*"): "`lineage`, `landmarks`, `dims`, `method`, `metric`, `source`",
}


def reference_table() -> str:
    """Markdown table of every streamembed_* metric (name, type, labels, help), from a fresh registry.

    docs/metrics.md is this table (a test keeps them equal).
    """
    values = dict(LABEL_VALUES)
    values[("streamembed_flags_total", "flag")] = ", ".join(FLAG_NAMES[b] for b in sorted(FLAG_NAMES))
    m = Metrics(CollectorRegistry())
    rows = ["| name | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for collector in list(m.registry._collector_to_names):  # the only way to list collectors
        labels = list(getattr(collector, "_labelnames", ()))
        for fam in collector.describe() if hasattr(collector, "describe") else collector.collect():
            if not fam.name.startswith("streamembed_"):
                continue
            name = fam.name + {"counter": "_total", "info": "_info"}.get(fam.type, "")
            if (name, "*") in values:
                shown = values[(name, "*")]
            else:
                shown = ", ".join(f"`{lb}`" + (f" ({values[(name, lb)]})" if (name, lb) in values else "")
                                  for lb in labels)
            typ = "gauge (info, 1)" if fam.type == "info" else fam.type
            doc = fam.documentation.replace("|", "\\|")
            rows.append(f"| `{name}` | {typ} | {shown} | {doc} |")
    return "\n".join(rows) + "\n"
