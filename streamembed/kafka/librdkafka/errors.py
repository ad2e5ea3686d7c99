"""librdkafka's errors as kafka-python's exception classes, so that one classification serves both libraries.

``kafka.client.is_transient`` (retried with backoff), ``is_too_large``
(split or cut), ``kafka.producer.is_lost_producer`` (a new producer) and the
source's refused-commit rule read kafka-python's classes (``kafka.errors``).
librdkafka reports a broker's error by the protocol's own code (the same
numbers: ``kafka.errors.for_code``) and its own conditions by negative codes,
mapped here to the class kafka-python raises for the same condition. A fatal
error of an idempotent producer (the broker lost its producer id or epoch)
becomes ``UnknownProducerIdError``: the producer is unusable, a new one works.
"""

from __future__ import annotations

from typing import Any

__all__ = ["as_kafka_error", "DATA_ERRORS", "NO_OFFSET", "LibrdkafkaLog"]

#: librdkafka's own error names -> the kafka.errors class of the same condition.
_LOCAL = {
    "_MSG_TIMED_OUT": "KafkaTimeoutError", "_TIMED_OUT": "KafkaTimeoutError", "_TIMED_OUT_QUEUE": "KafkaTimeoutError",
    "_QUEUE_FULL": "KafkaTimeoutError", "_TRANSPORT": "KafkaConnectionError",
    "_ALL_BROKERS_DOWN": "KafkaConnectionError", "_RESOLVE": "KafkaConnectionError",
    "_BAD_MSG": "CorruptRecordError", "_BAD_COMPRESSION": "CorruptRecordError",
    "_UNKNOWN_TOPIC": "UnknownTopicOrPartitionError", "_UNKNOWN_PARTITION": "UnknownTopicOrPartitionError",
    "_WAIT_COORD": "CoordinatorNotAvailableError", "_AUTHENTICATION": "AuthenticationFailedError",
    "_SSL": "AuthenticationFailedError", "_MAX_POLL_EXCEEDED": "CommitFailedError",
    "_ASSIGNMENT_LOST": "CommitFailedError", "_STATE": "IllegalStateError",
}
#: Errors that say a fetched batch cannot be read (its bytes: compression, CRC, framing), by name.
DATA_ERRORS = frozenset({"_BAD_MSG", "_BAD_COMPRESSION", "CORRUPT_MESSAGE", "INVALID_MSG"})
#: The error of a commit with nothing to commit.
NO_OFFSET = "_NO_OFFSET"


def as_kafka_error(err: Any, what: str) -> Exception:
    """A kafka-python exception for librdkafka's ``KafkaError`` ``err`` (or a ``KafkaException`` holding one),
    its message prefixed by ``what``; ``retriable`` where librdkafka says so."""
    import kafka.errors as ke

    if isinstance(err, BaseException) and err.args and hasattr(err.args[0], "code"):
        err = err.args[0]
    if not hasattr(err, "code"):
        return ke.KafkaError(f"{what}: {err}")
    name, text = err.name(), err.str()
    if getattr(err, "fatal", lambda: False)():
        cls: type[Exception] = ke.UnknownProducerIdError
    elif err.code() >= 0:
        cls = ke.for_code(err.code())
    else:
        cls = getattr(ke, _LOCAL.get(name, "KafkaError"), ke.KafkaError)
    exc = cls(f"{what}: {name}: {text}")
    if err.retriable() and not getattr(exc, "retriable", False):
        exc.retriable = True  # type: ignore[attr-defined]
    return exc


class LibrdkafkaLog:
    """What librdkafka logs, into ``logger`` at DEBUG (librdkafka retries connections itself and logs every failed
    attempt; what matters reaches the clients as errors: delivery reports, consumer errors, the error callback),
    except its configuration warnings (WARNING), of which those saying that a ``[kafka.client]`` property is for
    the other role are dropped (every property is given to the roles that take it, ``librdkafka.settings``)."""

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    def log(self, level: int, msg: str, *args: Any, **kw: Any) -> None:
        text = msg % args if args else msg
        if "CONFWARN" in text:
            if " property and will be ignored by this " not in text:
                self.logger.warning("librdkafka: %s", text)
            return
        self.logger.debug("librdkafka: %s", text)
