"""The metrics of a daemon that exports none (``metrics.enabled = false``): the same names, doing nothing.

With the ops server off nothing reads the metrics, so the daemon does not
import ``prometheus_client`` (with ``http.server`` and its exposition code,
0.025 CPU-s with compiled bytecode, 0.1 without) nor build its 45 collectors: the loop, the
sources, the drift monitor and the refits update :class:`NoMetrics` exactly
as they update ``ops.metrics.Metrics``, and every update is a no-op.
``METRIC_NAMES`` lists the attributes both carry (a test keeps it equal to
``Metrics``'s).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["NoMetrics", "METRIC_NAMES"]

#: Every metric attribute of ``ops.metrics.Metrics`` (``drift`` is a dict of gauges by statistic name).
METRIC_NAMES: tuple[str, ...] = (
    "batch_seconds", "checkpoints", "dead_letters", "drift", "drift_alarms", "drift_armed", "drift_arming_objects",
    "drift_captured_share", "drift_coverage", "drift_detector_expected_run_objects", "drift_member_statistic",
    "drift_member_threshold",
    "drift_detector_info", "drift_detector_statistic", "drift_detector_threshold", "drift_quantile", "files_reread",
    "files_written", "flags", "input_consistency", "input_consistency_alarm", "input_consistency_alarms",
    "kafka_assigned_partitions", "kafka_bytes_in", "kafka_commits", "kafka_consumer_lag", "kafka_group_lag",
    "kafka_messages_in", "kafka_messages_out", "kafka_partition_owned", "kafka_paused_partitions",
    "kafka_produce_errors", "kafka_rebalances", "kafka_retries",
    "last_batch", "last_refit", "latency", "model_info", "model_records_skipped", "model_version",
    "quarantined_batches", "read_retries",
    "records_embedded", "records_failed", "records_in", "refit_alignment_rms", "refit_failures", "refit_in_progress",
    "refit_seconds", "refit_trigger_level", "refit_trigger_value", "refits", "refits_kept", "relative_unexplained",
    "reservoir_objects",
)


class _Off:
    """A counter, gauge, histogram or info that records nothing (any labels give itself back)."""

    def inc(self, amount: float = 1) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass

    def observe_many(self, values: Any) -> None:
        pass

    def info(self, value: Mapping[str, str]) -> None:
        pass

    def labels(self, *values: str, **labels: str) -> _Off:
        return self

    def remove(self, *values: str) -> None:
        pass

    def clear(self) -> None:
        pass


class _OffFamily(Mapping[str, _Off]):
    """``drift[name]`` for any statistic name."""

    def __init__(self, off: _Off) -> None:
        self._off = off

    def __getitem__(self, name: str) -> _Off:
        return self._off

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


class NoMetrics:
    """Every name of ``ops.metrics.Metrics``, each a no-op; no registry (nothing is served)."""

    registry = None

    def __init__(self) -> None:
        off = _Off()
        for name in METRIC_NAMES:
            setattr(self, name, off)
        self.drift = _OffFamily(off)

