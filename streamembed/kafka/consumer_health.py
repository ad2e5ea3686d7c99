"""What the Kafka source watches on its consumer: brokers reachable, lag per partition, a pending join's spin.

Best effort throughout: a client without these internals says nothing rather than failing the source.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from collections.abc import Callable, Mapping

__all__ = ["JOIN_SPIN_PAUSE", "brokers_away", "measure_lag", "throttle_join_spin", "set_fetch_wait", "AdaptiveFetch",
           "rebalance_listener"]

log = logging.getLogger("streamembed.kafka.source")


#: Seconds a consumer poll rests after a coordinator step that returned at once (a pending group join).
JOIN_SPIN_PAUSE = 0.02


def brokers_away(consumer: Any) -> str | None:
    """Why the consumer cannot reach the brokers now (no connection, no known coordinator), or None."""
    own = getattr(consumer, "brokers_away", None)  # a client that knows it itself (librdkafka's)
    if callable(own):
        reason: str | None = own()
        return reason
    try:
        if consumer.metrics().get("consumer-metrics", {}).get("connection-count", 1) < 1:
            return "no connection to any broker"
        coordinator = getattr(consumer, "_coordinator", None)
        if coordinator is not None and coordinator.coordinator_unknown():
            return "the group coordinator is unknown"
    except Exception:  # best effort: a client without these says nothing
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
        except Exception:  # lag is best effort (e.g. revoked meanwhile)
            continue
        if hw is not None and nxt is not None:
            lag[p] = max(0, hw - nxt)
    return lag


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


def rebalance_listener(revoked: Callable[[set[Any]], None], assigned: Callable[[set[Any]], None]) -> Any:
    """A kafka-python ``ConsumerRebalanceListener`` (its callbacks run inside ``consumer.poll``): partitions revoked
    or lost go to ``revoked``, assigned ones to ``assigned``, each a set of ``TopicPartition``."""
    from kafka import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, tps: Any) -> None:
            revoked(set(tps))

        def on_partitions_lost(self, tps: Any) -> None:
            revoked(set(tps))

        def on_partitions_assigned(self, tps: Any) -> None:
            assigned(set(tps))

    return Listener()
