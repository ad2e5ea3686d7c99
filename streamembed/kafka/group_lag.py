"""The group's lag on every partition of the input topic, owned by this member or not, measured off the poll path.

Each member reports ``streamembed_kafka_group_lag`` and ``streamembed_kafka_partition_owned`` for every
partition of its topic, so that a partition no member consumes (its owner killed, the group not yet rebalanced)
is visible: owned by nobody (the members' ``owned`` sum to 0) with its lag growing (the orphaned-partition
alert, ``deploy/prometheus/alerts.yml``).

* Partitions this member owns: the source sets both from what it knows without a request (``owned_lag``): the
  lag it measures from the fetch high watermark, plus what it handed out but has not committed yet.
* The others: :class:`GroupLagWatcher`, a thread with a consumer of its own (the group's id, but never
  subscribed, so it never joins the group), asks the brokers every ``interval`` seconds for the partitions'
  end offsets and the group's committed offsets: end - committed (from the start of the log where nothing was
  committed yet). On Tansu the end offset of a partition nobody fetches is the base offset of its last record
  batch + 1 (``tools/broker.py``): a lag too small by at most that batch's size.

These requests (0.4-1.9 s on the test broker during a rebalance) are kept off the consumer that polls: on it,
they delayed its rejoin and a failover's takeover by 4-8 s (measured with ``tests/soak_failover.py``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["GroupLagWatcher", "owned_lag", "WATCHER_KEYS"]

log = logging.getLogger("streamembed.kafka.source")

#: The consumer settings the watcher keeps (connection and security; the group id to read its commits).
WATCHER_KEYS = frozenset({"bootstrap_servers", "client_id", "group_id", "security_protocol", "sasl_mechanism",
                          "sasl_plain_username", "sasl_plain_password", "ssl_cafile", "ssl_certfile", "ssl_keyfile",
                          "ssl_check_hostname", "api_version", "request_timeout_ms", "bootstrap_timeout_ms"})


def owned_lag(lag: int, handed: int | None, committed: int | None) -> int:
    """The group's lag on a partition this member owns: not yet handed to the loop, plus handed but not committed."""
    return lag + (max(0, handed - committed) if handed is not None and committed is not None else 0)


class GroupLagWatcher:
    """Every ``interval`` seconds, the group's lag of the topic's partitions that ``owned()`` does not hold, into
    ``metrics`` (``kafka_group_lag``, and ``kafka_partition_owned`` = 0). Best effort: a failed measure is tried
    again at the next interval."""

    def __init__(self, settings: Mapping[str, Any], topic: str, owned: Callable[[], set[int]], metrics: Any,
                 interval: float = 5.0, factory: Callable[..., Any] | None = None) -> None:
        # (dotted keys: a librdkafka client's own properties, security among them)
        self.settings = {k: v for k, v in settings.items() if k in WATCHER_KEYS or "." in k}
        self.settings["client_id"] = f"{settings.get('client_id', 'streamembed')}-lag"
        self.settings["enable_auto_commit"] = False
        self.topic, self.owned, self.metrics, self.interval = topic, owned, metrics, float(interval)
        self._factory = factory
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streamembed-group-lag", daemon=True)
        self.measures = 0

    def start(self) -> GroupLagWatcher:
        self._thread.start()
        return self

    def _consumer(self) -> Any:
        from kafka import KafkaConsumer

        return (self._factory or KafkaConsumer)(**self.settings)

    def _run(self) -> None:
        consumer = None
        try:
            while not self._stop.wait(self.interval):
                try:
                    consumer = consumer or self._consumer()
                    self.measure(consumer)
                except Exception as exc:
                    log.debug("measuring the group's lag failed (%s: %s)", type(exc).__name__, exc)
                    if consumer is not None:
                        _close(consumer)
                        consumer = None
        finally:
            if consumer is not None:
                _close(consumer)

    def measure(self, consumer: Any, timeout_ms: int = 5000) -> dict[int, int]:
        """One measure of the partitions not owned here: {partition: lag}, also set in the metrics."""
        from kafka import TopicPartition

        parts = consumer.partitions_for_topic(self.topic) or set()
        owned = self.owned()
        tps = [TopicPartition(self.topic, p) for p in sorted(parts) if p not in owned]
        if not tps:
            return {}
        ends = consumer.end_offsets(tps, timeout_ms=timeout_ms)
        committed = _committed(consumer, tps, timeout_ms)
        missing = [tp for tp in tps if committed.get(tp) is None]
        starts = consumer.beginning_offsets(missing, timeout_ms=timeout_ms) if missing else {}
        out: dict[int, int] = {}
        for tp in tps:
            end, done = ends.get(tp), committed.get(tp)
            done = starts.get(tp) if done is None else done
            if end is None or done is None or tp.partition in self.owned():  # taken meanwhile: the source says
                continue
            out[tp.partition] = max(0, int(end) - int(done))
            self.metrics.kafka_group_lag.labels(topic=self.topic, partition=str(tp.partition)).set(out[tp.partition])
            self.metrics.kafka_partition_owned.labels(topic=self.topic, partition=str(tp.partition)).set(0)
        self.measures += 1
        return out

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


def _committed(consumer: Any, tps: list[Any], timeout_ms: int) -> dict[Any, int | None]:
    """The group's committed offset of each partition (None: no commit), in one request where the client can."""
    own = getattr(consumer, "committed_offsets", None)
    if own is not None:
        found: dict[Any, int | None] = own(tps, timeout_ms=timeout_ms)
        return found
    coordinator = getattr(consumer, "_coordinator", None)
    fetch = getattr(coordinator, "fetch_committed_offsets", None)
    if fetch is not None:
        try:
            got = fetch(tps, timeout_ms=timeout_ms)
        except TypeError:  # kafka-python 2.x: no timeout
            got = fetch(tps)
        return {tp: (None if got.get(tp) is None or got[tp].offset < 0 else int(got[tp].offset)) for tp in tps}
    return {tp: consumer.committed(tp) for tp in tps}


def _close(consumer: Any) -> None:
    try:
        consumer.close()
    except Exception:
        log.debug("closing the group-lag consumer failed", exc_info=True)
