"""ReliableProducer against in-memory fakes: a lost producer id is a new producer, a stop drains for a bounded time.

Issue 35, attack #5: the broker killed and back 60 s later answered the daemon's produce with
``UnknownProducerIdError``, which was treated as permanent: exit 1. Attack #8: SIGTERM with a slow output gave
up after one 10 s flush round ("4 messages not acknowledged", exit 1) instead of draining for the documented time.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError, UnknownProducerIdError

from streamembed.kafka.producer import ReliableProducer, StoppedWhileDelivering
from streamembed.stream.sinks.base import StoppedUndelivered


class _Future:
    def __init__(self, exc: BaseException | None, done: bool = True) -> None:
        self.is_done, self.exception = done, exc

    def succeeded(self) -> bool:
        return self.is_done and self.exception is None


class _Producer:
    """Each send's outcome from ``outcomes`` (None: acknowledged); ``flush`` times out ``slow_flushes`` times."""

    def __init__(self, outcomes: list[BaseException | None], slow_flushes: int = 0) -> None:
        self.outcomes, self.slow_flushes = outcomes, slow_flushes
        self.sent: list[bytes] = []
        self.futures: list[_Future] = []
        self.closed = False

    def send(self, topic: str, value: bytes, key: bytes | None = None, headers: Any = None) -> _Future:
        self.sent.append(value)
        fut = _Future(self.outcomes.pop(0) if self.outcomes else None, done=self.slow_flushes == 0)
        self.futures.append(fut)
        return fut

    def flush(self, timeout: float | None = None) -> None:
        if self.slow_flushes:
            self.slow_flushes -= 1
            time.sleep(min(0.05, timeout or 0.05))
            raise KafkaTimeoutError("not yet")
        for f in self.futures:
            f.is_done = True

    def close(self, timeout: float = 0) -> None:
        self.closed = True


def test_a_producer_whose_id_the_broker_lost_is_replaced_and_the_messages_sent_again() -> None:
    made: list[_Producer] = []

    def factory(**settings: Any) -> _Producer:
        made.append(_Producer([UnknownProducerIdError("broker restarted")] * 2 if not made else []))
        return made[-1]

    p = ReliableProducer({"bootstrap_servers": "x"}, factory=factory, max_backoff=0.01)
    p.send("out", b"a")
    p.send("out", b"b")
    assert p.flush() == 2
    assert len(made) == 2 and made[0].closed and p.recreated == 1
    assert made[1].sent == [b"a", b"b"]
    assert p.unacked_bytes == 0 and p.pending_messages == 0


def test_asked_to_stop_the_producer_keeps_waiting_for_acknowledgements_within_the_drain_time() -> None:
    stop = threading.Event()
    stop.set()
    fake = _Producer([], slow_flushes=3)  # acknowledged after 3 rounds that time out
    p = ReliableProducer({}, factory=lambda **s: fake, stop=stop, drain_seconds=30.0, max_backoff=0.01)
    p.send("out", b"a")
    assert p.flush() == 1


def test_the_drain_ends_at_its_deadline_with_a_stop_error_that_loses_nothing() -> None:
    stop = threading.Event()
    fake = _Producer([], slow_flushes=10_000)  # never acknowledged
    p = ReliableProducer({}, factory=lambda **s: fake, stop=stop, drain_seconds=0.5, max_backoff=0.01)
    p.send("out", b"a")
    stop.set()
    t0 = time.monotonic()
    with pytest.raises(StoppedWhileDelivering, match="not acknowledged after 0.5 s") as info:
        p.flush()
    assert 0.4 <= time.monotonic() - t0 < 5.0
    assert isinstance(info.value, StoppedUndelivered)  # what the daemon exits 0 on
