"""A producer that tracks durability: :class:`ReliableProducer` keeps every message until the broker acknowledged it.

:meth:`ReliableProducer.flush` returns only when all are durable (re-sending
those that failed transiently) - the loop commits input offsets after that.
A message the client or the broker refuses as too large is handed back to its
sender (``on_too_large``), which splits or shrinks it: a size error must not
stop the daemon, or it fails again after every restart. A producer whose id
the broker lost (a broker restart: ``UnknownProducerIdError``) is replaced by
a new one, and asked to stop, :meth:`~ReliableProducer.flush` waits at most
``drain_seconds`` more (``run.stop_seconds``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Mapping

from streamembed.kafka.client import Backoff, KafkaDeliveryError, is_too_large, is_transient, retry
from streamembed.liveness import WAITS
from streamembed.stream.sinks.base import StoppedUndelivered

__all__ = ["ReliableProducer", "StoppedWhileDelivering", "is_lost_producer", "FLUSH_WAIT_SECONDS"]

log = logging.getLogger("streamembed.kafka")

#: ReliableProducer.flush waits for acknowledgements in rounds of this many seconds (each a sign of life).
FLUSH_WAIT_SECONDS = 10.0
#: ... in slices of this many seconds (a stop is noticed within one).
FLUSH_SLICE_SECONDS = 0.5


class StoppedWhileDelivering(KafkaDeliveryError, StoppedUndelivered):
    """Asked to stop, the producer waited ``drain_seconds`` for acknowledgements and gave up (nothing is lost: the
    input was not committed)."""


#: Errors that mean the producer's identity was lost (the broker restarted, or forgot it): a new producer works.
_LOST_PRODUCER = frozenset({"UnknownProducerIdError", "OutOfOrderSequenceNumberError", "InvalidProducerEpochError",
                            "ProducerFencedError", "InvalidProducerIdMappingError"})


def is_lost_producer(exc: BaseException | None) -> bool:
    """True for a produce error that a new producer does not have (its producer id is unknown to the broker)."""
    return type(exc).__name__ in _LOST_PRODUCER



@dataclass
class _Pending:
    future: Any
    topic: str
    value: bytes | None
    key: bytes | None
    headers: list[tuple[str, bytes]]
    size: int
    on_too_large: Callable[[int], None] | None = None


class ReliableProducer:
    """A ``KafkaProducer`` whose :meth:`flush` returns only when every message sent is acknowledged.

    Messages stay in memory until acknowledged; those that failed with a
    transient error are sent again (exponential backoff) during
    :meth:`flush`; a permanent error raises :class:`KafkaDeliveryError`.
    Once ``stop`` is set, :meth:`flush` keeps waiting and retrying for
    ``drain_seconds`` more, then raises :class:`StoppedWhileDelivering`: the
    caller then does not commit its input offsets, so nothing is lost.
    A message refused because the broker no longer knows the producer's id
    (``UnknownProducerIdError`` after a broker restart, and its kin:
    :func:`is_lost_producer`) makes a new client, which the messages are
    produced again with: the old one cannot recover. :attr:`unacked_bytes` is
    the backpressure signal (bytes sent but not yet acknowledged).
    """

    def __init__(self, settings: Mapping[str, Any], *, metrics: Any = None, stop: threading.Event | None = None,
                 max_backoff: float = 10.0, factory: Callable[..., Any] | None = None,
                 drain_seconds: float = 20.0) -> None:
        from kafka import KafkaProducer

        self.metrics = metrics
        self.stop = stop or threading.Event()
        self.max_backoff = max_backoff
        self.drain_seconds = float(drain_seconds)
        self._stop_seen: float | None = None
        self._make = factory or KafkaProducer
        self._settings = dict(settings)
        self.recreated = 0
        self._producer = self._connect()
        self._pending: deque[_Pending] = deque()
        self._unacked = 0
        self.delivered = 0

    def _connect(self) -> Any:
        return retry(lambda: self._make(**self._settings), "connecting the producer", stop=self.stop,
                     metrics=self.metrics, max_backoff=self.max_backoff)

    def _renew(self, why: BaseException) -> None:
        """Replace the client whose producer id the broker lost (the pending messages are then sent again)."""
        log.warning("the broker no longer knows this producer (%s: %s): making a new producer and sending the "
                    "unacknowledged messages again", type(why).__name__, why)
        old, self._producer = self._producer, None
        try:
            old.close(timeout=0)
        except Exception:
            log.debug("closing the abandoned producer failed", exc_info=True)
        self._producer = self._connect()
        self.recreated += 1

    def _stopping_over(self) -> bool:
        """True once ``stop`` has been set for ``drain_seconds``: stop waiting for acknowledgements."""
        if not self.stop.is_set():
            return False
        now = time.monotonic()
        if self._stop_seen is None:
            self._stop_seen = now
        return now - self._stop_seen >= self.drain_seconds

    def send(self, topic: str, value: bytes | None, *, key: bytes | None = None,
             headers: list[tuple[str, bytes]] | None = None,
             on_too_large: Callable[[int], None] | None = None) -> None:
        """Hand one message to the client (non-blocking unless its buffer is full).

        ``on_too_large(size)`` is called (instead of raising) when the client
        or, during :meth:`flush`, the broker refuses the message for its size;
        it sends what replaces it. Without it such a refusal raises
        :class:`KafkaDeliveryError`.
        """
        headers = headers or []
        size = (len(value) if value is not None else 0) + (len(key) if key else 0)
        try:
            fut = retry(lambda: self._producer.send(topic, value=value, key=key, headers=headers),
                        f"producing to {topic}", stop=self.stop, metrics=self.metrics, max_backoff=self.max_backoff)
        except Exception as exc:
            if not is_too_large(exc):
                raise
            if on_too_large is None:
                raise KafkaDeliveryError(f"producing to {topic}: {type(exc).__name__}: {exc}") from exc
            on_too_large(size)
            return
        self._pending.append(_Pending(fut, topic, value, key, headers, size, on_too_large))
        self._unacked += size

    @property
    def pending_messages(self) -> int:
        return len(self._pending)

    @property
    def unacked_bytes(self) -> int:
        """Bytes sent and not yet acknowledged (acknowledged ones at the front are counted out)."""
        # futures complete roughly in order; a failed one stays until flush re-sends it
        while self._pending and self._pending[0].future.is_done and self._pending[0].future.succeeded():
            p = self._pending.popleft()
            self._unacked -= p.size
            self._delivered(p.topic, 1)
        return self._unacked

    def _delivered(self, topic: str, n: int) -> None:
        self.delivered += n
        if self.metrics is not None:
            self.metrics.kafka_messages_out.labels(topic=topic).inc(n)

    def flush(self) -> int:
        """Block until every message sent so far is acknowledged; returns how many were pending.

        Waits in rounds of ``FLUSH_WAIT_SECONDS`` (each a sign of life for the probes, ``liveness.py``), so
        a broker outage keeps the daemon alive but unready instead of wedged.
        """
        with WAITS.waiting("waiting for the brokers to acknowledge produced messages") as attempt_failed:
            return self._flush(attempt_failed)

    def _wait_acknowledged(self, attempt_failed: Callable[[str], None]) -> None:
        """``KafkaProducer.flush()`` in rounds of FLUSH_WAIT_SECONDS until every send has an outcome.

        Each round waits in slices of ``FLUSH_SLICE_SECONDS``, so that a stop asked for meanwhile bounds the wait
        by ``drain_seconds`` from then on, not by what is left of the round.
        """
        from kafka.errors import KafkaTimeoutError

        while True:
            round_end = time.monotonic() + FLUSH_WAIT_SECONDS
            while True:
                left = round_end - time.monotonic()
                if self.stop.is_set():
                    self._stopping_over()
                    assert self._stop_seen is not None
                    left = min(left, self._stop_seen + self.drain_seconds - time.monotonic())
                try:
                    self._producer.flush(timeout=max(0.0, min(FLUSH_SLICE_SECONDS, left)))
                    return
                except KafkaTimeoutError as exc:
                    if self._stopping_over():
                        attempt_failed(f"not acknowledged when the stop time ran out: {exc}")
                        return  # the undone sends count as failed below: stopping raises StoppedWhileDelivering
                    if time.monotonic() >= round_end:
                        attempt_failed(f"not acknowledged within {FLUSH_WAIT_SECONDS:g} s: {exc}")
                        break

    def _flush(self, attempt_failed: Callable[[str], None]) -> int:
        total = 0
        backoff = Backoff(maximum=self.max_backoff)
        while self._pending:
            self._wait_acknowledged(attempt_failed)
            failed: list[_Pending] = []
            too_large: list[_Pending] = []
            counts: dict[str, int] = {}
            lost = self._sort_outcomes(counts, failed, too_large)
            for topic, n in counts.items():
                self._delivered(topic, n)
                total += n
            for p in too_large:  # after the pass: what they send is flushed by the next one
                log.warning("the broker refused a %d-byte message to %s as too large; splitting or shrinking it",
                            p.size, p.topic)
                assert p.on_too_large is not None
                p.on_too_large(p.size)
            if not failed:
                continue
            if self._stopping_over():
                raise StoppedWhileDelivering(f"stopping with {len(failed)} messages not acknowledged after "
                                             f"{self.drain_seconds:g} s (they will be produced again from the "
                                             "uncommitted input)")
            if lost is not None:
                self._renew(lost)
            delay = backoff.next_delay()
            attempt_failed(f"{len(failed)} messages failed transiently")
            log.warning("%d messages failed transiently; producing them again in %.2f s", len(failed), delay)
            if self.stop.is_set():  # draining: the stop event no longer cuts the backoff short
                assert self._stop_seen is not None
                time.sleep(max(0.0, min(delay, self._stop_seen + self.drain_seconds - time.monotonic())))
            else:
                self.stop.wait(delay)
            for p in failed:
                if self.metrics is not None:
                    self.metrics.kafka_retries.inc()
                self.send(p.topic, p.value, key=p.key, headers=p.headers, on_too_large=p.on_too_large)
        return total

    def _sort_outcomes(self, counts: dict[str, int], failed: list[_Pending],
                       too_large: list[_Pending]) -> BaseException | None:
        """Take every pending message out: delivered ones counted per topic, the others into ``failed`` (to send
        again) or ``too_large``; a permanent error raises. Returns a lost-producer error if one was seen."""
        lost: BaseException | None = None
        while self._pending:
            p = self._pending.popleft()
            self._unacked -= p.size
            fut = p.future
            if not fut.is_done:  # flush returned early (client closing, or the drain time ran out): send again
                failed.append(p)
                continue
            if fut.succeeded():
                counts[p.topic] = counts.get(p.topic, 0) + 1
                continue
            exc = fut.exception
            if self.metrics is not None:
                self.metrics.kafka_produce_errors.inc()
            if is_too_large(exc) and p.on_too_large is not None:
                too_large.append(p)
            elif is_lost_producer(exc):
                lost = exc
                failed.append(p)
            elif is_transient(exc):
                failed.append(p)
            else:
                raise KafkaDeliveryError(f"producing to {p.topic} failed permanently: "
                                         f"{type(exc).__name__}: {exc}") from exc
        return lost

    def close(self, timeout: float = 10.0) -> None:
        """Close the client; unacknowledged messages are dropped (their input was not committed). Once a stop's
        drain time is over, the client gets no more time to send them."""
        abandon = self._stopping_over()
        try:
            self._producer.close(timeout=0.0 if abandon else timeout)
        except Exception:
            if abandon:
                log.info("closed the Kafka producer with unacknowledged messages (produced again after the restart)")
            else:
                log.warning("closing the Kafka producer failed", exc_info=True)
