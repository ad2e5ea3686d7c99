"""What the Kafka source watches on its consumer: brokers reachable, lag per partition, a pending join's spin.

Best effort throughout: a client without these internals says nothing rather than failing the source.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from collections.abc import Mapping

__all__ = ["JOIN_SPIN_PAUSE", "brokers_away", "measure_lag", "throttle_join_spin", "group_lag", "export_group_lag",
           "set_fetch_wait", "AdaptiveFetch"]

log = logging.getLogger("streamembed.kafka.source")


#: Seconds a consumer poll rests after a coordinator step that returned at once (a pending group join).
JOIN_SPIN_PAUSE = 0.02


def brokers_away(consumer: Any) -> str | None:
    """Why the consumer cannot reach the brokers now (no connection, no known coordinator), or None."""
    try:
        if consumer.metrics().get("consumer-metrics", {}).get("connection-count", 1) < 1:
            return "no connection to any broker"
        coordinator = getattr(consumer, "_coordinator", None)
        if coordinator is not None and coordinator.coordinator_unknown():
            return "the group coordinator is unknown"
    except Exception:  # noqa: BLE001 - best effort: a client without these says nothing
        return None
    return None


def throttle_join_spin(consumer: Any, pause: float = JOIN_SPIN_PAUSE) -> bool:
    """Make a pending group join cost nothing: True if the consumer could be adjusted.

    While a JoinGroup is pending (Tansu holds it ~half the session timeout,
    ~20 s by default), kafka-python 3's coordinator step returns False within
    about a millisecond and ``KafkaConsumer.poll`` calls it again at once until
    its timeout: ~800 rounds a second, a third of a core. Wrapped here, a
    coordinator step that returns False that quickly is followed by a
    ``pause``-second sleep (the poll still blocks for its timeout, so nothing
    else changes: the join's round trips are driven as before, ~50 times a
    second at most instead of ~800). Consumers without that method are left alone.
    """
    coordinator: Any = getattr(consumer, "_coordinator", None)
    step = getattr(coordinator, "poll", None)
    if coordinator is None or step is None or getattr(step, "_streamembed_throttled", False):
        return False

    def throttled(timeout_ms: Any = None, **kw: Any) -> Any:
        t0 = time.monotonic()
        done = step(timeout_ms=timeout_ms, **kw)
        spent = time.monotonic() - t0
        if not done and spent < pause / 2:
            rest = pause if timeout_ms is None else min(pause, timeout_ms / 1000 - spent)
            if rest > 0:
                time.sleep(rest)  # within the poll's own timeout: the poll lasts no longer
        return done

    throttled._streamembed_throttled = True  # type: ignore[attr-defined]
    coordinator.poll = throttled
    return True


def measure_lag(consumer: Any, topic: str, partitions: set[int], next_offsets: Mapping[int, int]) -> dict[int, int]:
    """Lag per partition: fetch high watermark - the next offset to hand out (``next_offsets``: the first queued,
    else after the handed; else the consumer's position). Best effort: a partition that cannot be measured now is
    left out."""
    from kafka import TopicPartition

    lag: dict[int, int] = {}
    for p in sorted(partitions):
        tp = TopicPartition(topic, p)
        try:
            hw = consumer.highwater(tp)
            nxt = next_offsets.get(p)
            if nxt is None:
                nxt = consumer.position(tp, timeout_ms=100)
        except Exception:  # noqa: BLE001 - lag is best effort (e.g. revoked meanwhile)
            continue
        if hw is not None and nxt is not None:
            lag[p] = max(0, hw - nxt)
    return lag


def group_lag(consumer: Any, topic: str, timeout_ms: int = 2000) -> dict[int, int] | None:
    """The consumer group's lag on every partition of ``topic``: end of the log - the group's committed offset
    (a partition without a commit counts from the start of its log), whichever member owns it, or none does.

    The end of the log is the fetch high watermark where this member has fetched the partition, else the
    broker's ListOffsets answer (on Tansu the base offset of the last record batch + 1: a lag too small by at
    most that batch's size). None when it cannot be measured now (the brokers away, metadata unknown).
    """
    from kafka import TopicPartition

    try:
        parts = consumer.partitions_for_topic(topic)
        if not parts:
            return None
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        ends: dict[Any, int | None] = {tp: consumer.highwater(tp) for tp in tps}
        unknown = [tp for tp, hw in ends.items() if hw is None]
        if unknown:
            ends.update(consumer.end_offsets(unknown, timeout_ms=timeout_ms))
        committed = _committed(consumer, tps, timeout_ms)
        starts = consumer.beginning_offsets([tp for tp in tps if committed.get(tp) is None], timeout_ms=timeout_ms) \
            if any(committed.get(tp) is None for tp in tps) else {}
    except Exception:  # noqa: BLE001 - best effort: the next measure may succeed
        return None
    out: dict[int, int] = {}
    for tp in tps:
        end, done = ends.get(tp), committed.get(tp)
        if done is None:
            done = starts.get(tp)
        if end is not None and done is not None:
            out[tp.partition] = max(0, int(end) - int(done))
    return out


def _committed(consumer: Any, tps: list[Any], timeout_ms: int) -> dict[Any, int | None]:
    """The group's committed offset of each partition (None: no commit), in one request where the client can."""
    coordinator = getattr(consumer, "_coordinator", None)
    fetch = getattr(coordinator, "fetch_committed_offsets", None)
    if fetch is not None:
        try:
            got = fetch(tps, timeout_ms=timeout_ms)
        except TypeError:  # kafka-python 2.x: no timeout
            got = fetch(tps)
        return {tp: (None if got.get(tp) is None or got[tp].offset < 0 else int(got[tp].offset)) for tp in tps}
    return {tp: consumer.committed(tp) for tp in tps}


def set_fetch_wait(consumer: Any, max_wait_ms: int, min_bytes: int) -> bool:
    """Change the consumer's fetch wait and minimum size for its next fetches; False if the client cannot.

    kafka-python's fetcher reads both from its own config each time it builds a fetch request.
    """
    config = getattr(getattr(consumer, "_fetcher", None), "config", None)
    if not isinstance(config, dict) or "fetch_max_wait_ms" not in config:
        return False
    config["fetch_max_wait_ms"] = int(max_wait_ms)
    config["fetch_min_bytes"] = int(min_bytes)
    return True


def export_group_lag(consumer: Any, topic: str, owned: set[int], metrics: Any) -> None:
    """Set ``streamembed_kafka_group_lag`` and ``streamembed_kafka_partition_owned`` for every partition of
    ``topic`` (:func:`group_lag`; ``owned``: this member's partitions). Nothing when it cannot be measured now."""
    lags = group_lag(consumer, topic)
    if lags is None:
        return
    for p, lag in lags.items():
        metrics.kafka_group_lag.labels(topic=topic, partition=str(p)).set(lag)
        metrics.kafka_partition_owned.labels(topic=topic, partition=str(p)).set(int(p in owned))


class AdaptiveFetch:
    """``kafka.fetch_max_wait_ms = "auto"``: the consumer's fetch wait and minimum size follow its backlog.

    Caught up (backlog at most ``threshold`` messages): ``CAUGHT_UP_FETCH``, a short wait, since a broker that
    holds every fetch for its wait (Tansu) adds it to every record's latency. Behind (above ``threshold``, until
    it falls below a quarter of it): ``BEHIND_FETCH``, fetches of at least 1 MiB, so that a backlog is read in
    full fetches rather than in many small ones (benchmarks/bench_kafka_latency.py, docs/kafka.md).
    """

    def __init__(self, consumer: Any, threshold: int) -> None:
        self.consumer, self.threshold = consumer, max(1, int(threshold))
        self.behind = False

    def follow(self, backlog: int) -> None:
        from streamembed.kafka.client import BEHIND_FETCH, CAUGHT_UP_FETCH

        behind = backlog > (self.threshold // 4 if self.behind else self.threshold)
        if behind != self.behind and set_fetch_wait(self.consumer, *(BEHIND_FETCH if behind else CAUGHT_UP_FETCH)):
            self.behind = behind
            log.debug("fetch wait %d ms (%s)", (BEHIND_FETCH if behind else CAUGHT_UP_FETCH)[0],
                      "behind" if behind else "caught up", extra={"backlog": backlog})
