"""A confluent-kafka producer with the surface of kafka-python's ``KafkaProducer`` that streamembed uses.

``send`` hands the message to librdkafka (which batches, compresses and sends
it from its own threads) and returns a :class:`DeliveryFuture` that its
delivery report completes; reports are served by every ``send``, by a
future's ``is_done`` and by ``flush``. ``flush(timeout)`` raises
``KafkaTimeoutError`` when messages are still unacknowledged at the timeout
(kafka-python's contract, on which ``kafka.producer.ReliableProducer``
builds). Errors are kafka-python's classes (``librdkafka.errors``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from streamembed.kafka.librdkafka.errors import LibrdkafkaLog, as_kafka_error
from streamembed.kafka.librdkafka.settings import bootstrap_seconds, producer_conf

__all__ = ["LibrdkafkaProducer", "DeliveryFuture", "RecordMetadata"]

log = logging.getLogger("streamembed.kafka.librdkafka")

#: Seconds ``send`` waits for room when librdkafka's queue is full, before it raises a transient error.
QUEUE_FULL_WAIT_SECONDS = 10.0


def _on_error(err: Any) -> None:
    """librdkafka's error callback: fatal errors are logged (the next delivery report raises them), the others are
    retried by librdkafka."""
    if err.fatal():
        log.error("the librdkafka producer failed: %s", err)
    else:
        log.debug("librdkafka producer: %s", err)


class RecordMetadata(NamedTuple):
    """Where an acknowledged message landed."""

    topic: str
    partition: int
    offset: int


class DeliveryFuture:
    """The outcome of one ``send``: done once librdkafka reported its delivery (or failure)."""

    __slots__ = ("_producer", "_done", "_exception", "_metadata")

    def __init__(self, producer: LibrdkafkaProducer) -> None:
        self._producer = producer
        self._done = False
        self._exception: Exception | None = None
        self._metadata: RecordMetadata | None = None

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._exception = as_kafka_error(err, f"producing to {msg.topic()}")
        else:
            self._metadata = RecordMetadata(msg.topic(), msg.partition(), msg.offset())
        self._done = True

    @property
    def is_done(self) -> bool:
        if not self._done:
            self._producer.serve(0)
        return self._done

    def succeeded(self) -> bool:
        return self._done and self._exception is None

    def failed(self) -> bool:
        return self._done and self._exception is not None

    @property
    def exception(self) -> Exception | None:
        return self._exception

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """The message's metadata once acknowledged (raises its error, or ``KafkaTimeoutError`` at ``timeout``)."""
        from kafka.errors import KafkaTimeoutError

        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._done:
            if deadline is not None and time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"no delivery report within {timeout} s")
            self._producer.serve(0.05)
        if self._exception is not None:
            raise self._exception
        assert self._metadata is not None
        return self._metadata


class LibrdkafkaProducer:
    """``KafkaProducer(**settings)`` on librdkafka (settings in kafka-python's names: ``librdkafka.settings``).

    The constructor asks the brokers for metadata (within kafka-python's ``bootstrap_timeout_ms``), as
    kafka-python's does, so that unreachable brokers fail it with a transient error, retried by the caller.
    """

    def __init__(self, **settings: Any) -> None:
        import confluent_kafka as ck

        self._p: Any = ck.Producer({**producer_conf(settings), "logger": LibrdkafkaLog(log), "error_cb": _on_error})
        try:
            self._p.list_topics(timeout=bootstrap_seconds(settings))
        except ck.KafkaException as exc:
            raise as_kafka_error(exc, "connecting the producer") from None

    def serve(self, timeout: float = 0) -> None:
        """Serve delivery reports (completes futures)."""
        if self._p is not None:
            self._p.poll(timeout)

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
             headers: Sequence[tuple[str, bytes]] | None = None, partition: int | None = None) -> DeliveryFuture:
        """Hand one message to librdkafka; its future completes with the delivery report."""
        import confluent_kafka as ck

        fut = DeliveryFuture(self)
        kw: dict[str, Any] = {"on_delivery": fut._report}
        if headers:
            kw["headers"] = list(headers)
        if partition is not None:
            kw["partition"] = partition
        deadline = time.monotonic() + QUEUE_FULL_WAIT_SECONDS
        while True:
            try:
                self._p.produce(topic, value, key, **kw)
                break
            except BufferError:  # librdkafka's queue is full: serve reports until there is room
                if time.monotonic() >= deadline:
                    from kafka.errors import KafkaTimeoutError

                    raise KafkaTimeoutError(f"librdkafka's queue stayed full for {QUEUE_FULL_WAIT_SECONDS:g} s") \
                        from None
                self._p.poll(0.05)
            except ck.KafkaException as exc:
                raise as_kafka_error(exc, f"producing to {topic}") from None
        self._p.poll(0)
        return fut

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every message sent has its delivery report (``KafkaTimeoutError`` at ``timeout``)."""
        left = self._p.flush(-1 if timeout is None else max(0.0, timeout))
        if left:
            from kafka.errors import KafkaTimeoutError

            raise KafkaTimeoutError(f"{left} messages not acknowledged within {timeout} s")

    def close(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for what is in flight (0: none), then let the client go."""
        if self._p is None:
            return
        if timeout is None or timeout > 0:
            self._p.flush(-1 if timeout is None else timeout)
        try:  # what is left is dropped (its input was not committed), so that destroying the client cannot wait
            self._p.purge(in_queue=True, in_flight=True)
            self._p.poll(0)
        except Exception:
            log.debug("purging the producer failed", exc_info=True)
        self._p = None
