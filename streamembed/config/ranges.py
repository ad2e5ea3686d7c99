"""The range of every numeric setting: one table, checked when the configuration is loaded.

Each numeric key of the schema (``config.schema``) has its entry here:
``(lowest, highest)`` and whether the lowest value itself is excluded. A
value outside is refused at start (exit 2) with the range, from a TOML file,
the environment and ``--set`` alike (``config.load``); a design test checks
that every numeric key of the schema has an entry and every entry a key.
Bounds are what the code can use, not what is wise: a duration of
``1e-320`` s or a row count of ``10**20`` is refused here, a merely unusual
value is not. Combinations (a heartbeat slower than a third of the session
timeout, a poll interval shorter than a batch may take) are
``config.checks``'.

Durations are at most ``MAX_DURATION_SECONDS`` (23 days, below the 2^31 ms
that Kafka's protocol and ``threading`` waits take); sizes in bytes at most
``MAX_BYTES`` (1 TiB); counts of rows or objects at most ``MAX_ROWS``.
"""

from __future__ import annotations

from typing import NamedTuple

from streamembed.config.fields import MAX_DURATION_SECONDS

__all__ = ["Range", "RANGES", "MAX_BYTES", "MAX_ROWS", "range_of", "describe_range"]

#: The largest size in bytes any setting may name (1 TiB).
MAX_BYTES = 1 << 40
#: The largest count of rows or objects any setting may name (10^12).
MAX_ROWS = 10**12
_S = float(MAX_DURATION_SECONDS)
#: Kafka's protocol carries sizes and counts as signed 32-bit integers.
_INT32 = 2**31 - 1


class Range(NamedTuple):
    """Allowed values ``lowest <= v <= highest`` (``lowest < v`` when ``exclusive_low``, ``v < highest`` when
    ``exclusive_high``)."""

    lowest: float
    highest: float
    exclusive_low: bool = False
    exclusive_high: bool = False

    def contains(self, value: float) -> bool:
        low_ok = value > self.lowest if self.exclusive_low else value >= self.lowest
        return low_ok and (value < self.highest if self.exclusive_high else value <= self.highest)


#: key -> its range. Grouped by section in the schema's order.
RANGES: dict[str, Range] = {
    # [model]
    "model.k0_rows": Range(1, 10_000_000),
    "model.max_batch_seconds": Range(0.0, _S),
    "model.kernel_bandwidth": Range(0.0, 1e300),
    "model.n_landmarks": Range(2, 100_000),
    "model.n_components": Range(1, 1000),
    "model.fit_sample": Range(2, 10_000_000),
    "model.geodesic_neighbors": Range(0, 100_000),
    # [source]
    "source.batch_rows": Range(1, 10_000_000),
    "source.max_block_rows": Range(1, 1_000_000),
    # [directory]
    "directory.poll_seconds": Range(0.001, 3600.0),
    "directory.settle_seconds": Range(0.0, 3600.0),
    "directory.incomplete_seconds": Range(0.0, _S),
    # [generator]
    "generator.seed": Range(0, 2**32 - 1),
    "generator.n_features": Range(2, 100_000),
    "generator.clusters": Range(1, 10_000),
    "generator.intrinsic_dims": Range(1, 100_000),
    "generator.cluster_spread": Range(0.0, 1e12),
    "generator.cluster_std": Range(0.0, 1e12),
    "generator.noise_std": Range(0.0, 1e12),
    "generator.drift_speed": Range(0.0, 1e12),
    "generator.new_cluster_after": Range(0, MAX_ROWS),
    "generator.new_cluster_offset": Range(0.0, 1e12),
    "generator.rate": Range(0.0, 1e9),
    # [output]
    "output.roll_rows": Range(1, 1_000_000_000),
    "output.roll_seconds": Range(0.01, _S),
    "output.schema_version": Range(1, 2),
    "output.row_group_rows": Range(1, 100_000_000),
    # [run]
    "run.max_batches": Range(0, MAX_ROWS),
    "run.max_records": Range(0, MAX_ROWS),
    "run.progress_seconds": Range(0.0, _S),
    "run.max_batch_attempts": Range(1, 100),
    "run.stop_seconds": Range(0.0, 3600.0),
    # [drift]
    "drift.window_objects": Range(100, MAX_ROWS),
    "drift.window_seconds": Range(0.0, _S),
    "drift.reservoir_objects": Range(0, MAX_ROWS),
    "drift.stats_every_objects": Range(1, 1_000_000_000),
    "drift.stats_every_seconds": Range(0.0, _S),
    "drift.expected_run_objects": Range(1.0, 1e15),
    "drift.min_shift": Range(0.0, 1e6, exclusive_low=True),
    "drift.group_objects": Range(1, 1_000_000),
    "drift.clip_quantile": Range(0.5, 1.0, exclusive_low=True),
    "drift.confidence": Range(0.5, 1.0, exclusive_low=True),
    "drift.history_seconds": Range(0.0, _S),
    "drift.ratio": Range(1.0, 1e6),
    "drift.margin": Range(0.0, 1e6),
    "drift.threshold": Range(0.0, 1e12),
    "drift.hysteresis": Range(0.0, 1.0),
    "drift.min_objects": Range(1, 1_000_000_000),
    "drift.baseline_objects": Range(1, 1_000_000_000),
    "drift.cooldown_seconds": Range(0.0, _S),
    "drift.plane_axes": Range(2, 1000),
    "drift.plane_rows": Range(1, 10_000_000),
    "drift.plane_objects": Range(4, 1_000_000),
    "drift.plane_min_shift": Range(0.0, 1e6, exclusive_low=True),
    "drift.coverage_every_objects": Range(1, MAX_ROWS),
    "drift.coverage_objects": Range(20, 10_000),
    "drift.coverage_min_shift": Range(0.0, 1e6, exclusive_low=True),
    # [consistency]
    "consistency.window_objects": Range(10, 10_000_000),
    "consistency.min_objects": Range(1, 1_000_000_000),
    "consistency.sample_rows": Range(1, 10_000_000),
    "consistency.alarm_below": Range(0.0, 1.0, exclusive_low=True),
    # [refit]
    "refit.n_landmarks": Range(0, 100_000),
    "refit.retain_versions": Range(0, 100),
    "refit.timeout_seconds": Range(1.0, _S),
    "refit.min_gain": Range(0.0, 10.0),
    "refit.request_seconds": Range(0.0, _S),
    "refit.request_candidates": Range(20, 20_000),
    "refit.unversioned_rows": Range(1, 2**62),
    "refit.drain_seconds": Range(0.0, _S),
    # [kafka]
    "kafka.model_poll_seconds": Range(0.0, _S),
    "kafka.model_wait_seconds": Range(0.0, _S),
    "kafka.poll_timeout_ms": Range(0, 60_000),
    "kafka.fetch_max_wait_ms": Range(1, 60_000),
    "kafka.max_poll_records": Range(1, 1_000_000),
    "kafka.max_poll_interval_ms": Range(1000, MAX_DURATION_SECONDS * 1000),
    "kafka.session_timeout_ms": Range(1000, 1_800_000),
    "kafka.heartbeat_interval_ms": Range(100, 600_000),
    "kafka.fetch_max_bytes": Range(1024, _INT32),
    "kafka.max_partition_fetch_bytes": Range(1024, _INT32),
    "kafka.max_request_size": Range(1024, _INT32),
    "kafka.batch_size": Range(0, _INT32),
    "kafka.linger_ms": Range(0, 60_000),
    "kafka.max_unacked_bytes": Range(1, MAX_BYTES),
    "kafka.startup_timeout_seconds": Range(0.0, _S),
    "kafka.retry_backoff_max_seconds": Range(0.001, 3600.0),
    # [metrics]
    "metrics.port": Range(0, 65535),
    "metrics.wedged_after_seconds": Range(1.0, _S),
    "metrics.max_connections": Range(1, 100_000),
    "metrics.max_connections_per_client": Range(1, 100_000),
    "metrics.request_timeout_seconds": Range(0.1, 3600.0),
    "metrics.map_points": Range(0, 100_000),
    # [trust]
    "trust.coverage": Range(0.0, 1.0, exclusive_low=True, exclusive_high=True),
    # [metric]
    "metric.max_object_length": Range(1, 100_000_000),
}

def range_of(key: str) -> Range | None:
    """The range of ``section.key`` (None: not a numeric setting)."""
    return RANGES.get(key)


def describe_range(r: Range) -> str:
    """``">= 1 and <= 100"``, ``"> 0 and <= 1"``: how a refusal and the reference state a range."""
    def num(x: float) -> str:
        if float(x).is_integer() and abs(x) < 1e15:
            return f"{int(x):,}".replace(",", "_") if abs(x) >= 100_000 else str(int(x))
        return f"{x:g}"

    return (f"{'>' if r.exclusive_low else '>='} {num(r.lowest)} and {'<' if r.exclusive_high else '<='} "
            f"{num(r.highest)}")
