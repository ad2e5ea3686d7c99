"""How large a produced message may be, and how to make a dead letter fit.

A message larger than the producer's ``max_request_size`` is refused by the
client before it is sent, one larger than the broker's ``message.max.bytes``
(or the topic's ``max.message.bytes``) by the broker after it was: either way
a sink that sent it as is would fail the same way after every restart. So the
sinks measure each message first (:func:`message_size`, kafka-python's own
estimate of the record batch it makes), split what can be split (Arrow output
by rows) and shrink what cannot (:func:`fit_value`: a dead letter's value is
cut to fit, and the whole record is kept elsewhere). :func:`topic_limit` asks
the broker for the topic's limit where it answers (a real Kafka cluster; the
Tansu test broker does not describe configs, and has no limit).
"""

from __future__ import annotations

import logging
from typing import Any
from collections.abc import Mapping, Sequence

__all__ = ["message_size", "fits", "fit_value", "fit_header", "topic_limit", "TRUNCATED_HEADER", "FULL_RECORD_HEADER"]

log = logging.getLogger("streamembed.kafka")

#: Header of a dead letter whose value was cut: the value's original length in bytes.
TRUNCATED_HEADER = "streamembed-truncated-from"
#: Header of a dead letter whose value was cut: where the whole record was kept (a dead-letter file).
FULL_RECORD_HEADER = "streamembed-full-record"
#: A header value longer than this is cut (an id of megabytes must not make its dead letter too large).
HEADER_LIMIT = 2000
#: Bytes kept free under a limit: the request framing around one record batch.
_SLACK = 512


def message_size(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]) -> int:
    """The bytes kafka-python counts for one message against ``max_request_size`` (its record batch estimate)."""
    try:
        from kafka.record.default_records import DefaultRecordBatchBuilder

        return int(DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, list(headers)))
    except Exception:  # another kafka-python: a conservative estimate of our own
        return (61 + 21 + (len(key) if key else 0) + (len(value) if value else 0)
                + sum(len(k.encode()) + len(v) + 10 for k, v in headers))


def fits(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]], limit: int) -> bool:
    return message_size(key, value, headers) + _SLACK <= limit


def fit_header(value: bytes, limit: int = HEADER_LIMIT) -> bytes:
    """A header value cut to ``limit`` bytes (with a marker saying how long it was)."""
    if len(value) <= limit:
        return value
    return value[:limit] + f"...({len(value):,} bytes)".encode()


def fit_value(key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]], limit: int) -> bytes:
    """``value`` cut so that the message fits ``limit`` (empty if even the headers leave no room)."""
    room = limit - _SLACK - message_size(key, b"", headers) - 10  # 10: the value's length as a varint
    return value[:max(0, room)]


def topic_limit(admin_settings: Mapping[str, Any], topic: str, clients: Any) -> int | None:
    """The topic's ``max.message.bytes`` (else the broker's ``message.max.bytes``) if the cluster says; else None.

    Best effort: an older broker, missing DescribeConfigs permission or a
    broker that does not describe configs (Tansu) gives None. ``clients``: the
    library's (``kafka.libraries.Clients``), which asks.
    """
    limit: int | None = clients.topic_limit(admin_settings, topic)
    return limit
