"""The output topic and the dead-letter topic, as loop sinks; fan-out to several sinks.

Both topic sinks send as rows arrive (``write``) and become durable on
``flush``: :meth:`ReliableProducer.flush` returns only when the broker has
acknowledged every message (transient failures are produced again). The loop
commits input offsets after ``flush`` returned, so a message is never
committed before its outputs are on the output topic.

Output messages (``output_format``):

* ``arrow``: one Arrow IPC stream per input batch (split only to stay under
  ``max_request_size``) in the output schema of
  :func:`streamembed.stream.records.output_schema`, keyed by the *first* row's
  id. Keying by the first id keeps a batch's rows in one message (the 19 us
  per-message decode cost is paid once per ~1000 rows, not per row); a
  consumer that needs all rows of one id on one partition should use
  ``json`` (or re-key downstream).
* ``json``: one object per row, keyed by its id (so per-id order holds).

Dead-letter messages: see :func:`dead_letter_headers`.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import pyarrow as pa

from streamembed.kafka.client import ReliableProducer
from streamembed.kafka.codec import (
    CONTENT_TYPE_HEADER,
    JSON_CONTENT_TYPE,
    output_arrow_messages,
    output_json_messages,
)
from streamembed.kafka.source import Coordinates, KafkaDeadRecord
from streamembed.stream.codecs import DeadRecord

__all__ = ["KafkaOutputSink", "KafkaDeadLetterSink", "FanoutSink", "dead_letter_headers", "DLQ_HEADERS"]

#: Header names of a dead-letter message, in the order they are written.
DLQ_HEADERS = (
    "streamembed-error-reason",
    "streamembed-error-detail",
    "streamembed-source-topic",
    "streamembed-source-partition",
    "streamembed-source-offset",
    "streamembed-source-row",
    "streamembed-id",
    "streamembed-model-version",
    "streamembed-failed-at",
    CONTENT_TYPE_HEADER,
)
_DETAIL_LIMIT = 2000


class _Pending:
    """Rows handed to a topic since the last flush (the loop's roll logic reads these)."""

    def __init__(self) -> None:
        self.rows = 0
        self.since: float | None = None

    def add(self, n: int) -> None:
        if n and self.since is None:
            self.since = time.monotonic()
        self.rows += n

    @property
    def age(self) -> float:
        return 0.0 if self.since is None else time.monotonic() - self.since

    def clear(self) -> None:
        self.rows, self.since = 0, None


class _TopicSink:
    """What the loop asks every topic sink: rows written but not yet acknowledged, and since when."""

    _pending: _Pending
    producer: ReliableProducer

    def flush(self, label: str) -> Path | None:
        """Return when every row written so far is acknowledged by the broker."""
        self.producer.flush()
        self._pending.clear()
        return None

    def close(self) -> None:
        self._pending.clear()

    @property
    def pending_rows(self) -> int:
        return self._pending.rows

    @property
    def pending_age(self) -> float:
        return self._pending.age


class KafkaOutputSink(_TopicSink):
    """Embedded rows to ``topic`` as Arrow IPC or JSON messages (see the module doc)."""

    def __init__(self, producer: ReliableProducer, topic: str, *, fmt: str = "arrow",
                 max_message_bytes: int = 1 << 20) -> None:
        if fmt not in ("arrow", "json"):
            raise ValueError(f"output format must be 'arrow' or 'json', got {fmt!r}")
        self.producer = producer
        self.topic = topic
        self.fmt = fmt
        self.max_message_bytes = int(max_message_bytes)
        self._pending = _Pending()

    def write(self, data: pa.RecordBatch | pa.Table, label: str) -> None:
        if data.num_rows == 0:
            return
        messages = (output_arrow_messages(data, self.max_message_bytes) if self.fmt == "arrow"
                    else output_json_messages(data))
        for key, value, headers in messages:
            self.producer.send(self.topic, value, key=key, headers=headers)
        self._pending.add(data.num_rows)



def dead_letter_headers(d: DeadRecord, where: Coordinates | KafkaDeadRecord | None, *, model_version: int | None,
                        failed_at: str) -> list[tuple[str, bytes]]:
    """Headers of one dead-letter message (names: :data:`DLQ_HEADERS`).

    ``streamembed-source-row`` is present for a row refused inside a message
    (the value is then the row as JSON); absent when the whole message was
    refused (the value is then the original bytes, with its content-type).
    """
    h: list[tuple[str, bytes]] = [("streamembed-error-reason", d.reason.encode())]
    if d.detail:
        h.append(("streamembed-error-detail", d.detail[:_DETAIL_LIMIT].encode("utf-8", "replace")))
    if where is not None:
        h.append(("streamembed-source-topic", where.topic.encode()))
        h.append(("streamembed-source-partition", str(where.partition).encode()))
        h.append(("streamembed-source-offset", str(where.offset).encode()))
    row = where.row if isinstance(where, Coordinates) else d.row
    if row is not None and d.raw is None:
        h.append(("streamembed-source-row", str(row).encode()))
    if d.id is not None:
        h.append(("streamembed-id", d.id.encode("utf-8", "replace")))
    if model_version is not None:
        h.append(("streamembed-model-version", str(model_version).encode()))
    h.append(("streamembed-failed-at", failed_at.encode()))
    if d.raw is not None:
        ctype = where.content_type if isinstance(where, KafkaDeadRecord) else None
        if ctype:
            h.append((CONTENT_TYPE_HEADER, ctype.encode()))
    else:
        h.append((CONTENT_TYPE_HEADER, JSON_CONTENT_TYPE.encode()))
    return h


class KafkaDeadLetterSink(_TopicSink):
    """Dead letters to ``topic`` (default ``<input>.dlq``).

    Value: the original message bytes when the whole message was refused, or
    the refused row as JSON text; key: the original message key, or the
    row's id. ``locate(label, row)`` (the source's) resolves the coordinates
    of rows refused by the embedder.
    """

    def __init__(self, producer: ReliableProducer, topic: str,
                 locate: Callable[[str | None, int | None], Coordinates | None] | None = None) -> None:
        self.producer = producer
        self.topic = topic
        self.locate = locate
        self._pending = _Pending()

    def write(self, dead: Sequence[DeadRecord], label: str, *, model_version: int | None,
              source: str | None = None) -> None:
        if not dead:
            return
        now = datetime.now(timezone.utc).isoformat()
        for d in dead:
            where: Coordinates | KafkaDeadRecord | None
            if isinstance(d, KafkaDeadRecord):
                where, key = d, d.key
            else:
                where = self.locate(d.file, d.row) if self.locate is not None else None
                key = None
            if d.raw is not None:
                value = d.raw
            else:
                value = (d.record if d.record is not None else json.dumps({"id": d.id})).encode("utf-8")
                key = d.id.encode("utf-8") if d.id is not None else key
            self.producer.send(self.topic, value, key=key,
                               headers=dead_letter_headers(d, where, model_version=model_version, failed_at=now))
        self._pending.add(len(dead))



class FanoutSink:
    """Several sinks behind one: ``write`` to each, ``flush`` each (the first path returned wins)."""

    def __init__(self, sinks: Sequence[Any]) -> None:
        if not sinks:
            raise ValueError("FanoutSink needs at least one sink")
        self.sinks = list(sinks)

    @property
    def pending_rows(self) -> int:
        return max(s.pending_rows for s in self.sinks)

    @property
    def pending_age(self) -> float:
        return max(s.pending_age for s in self.sinks)

    def write(self, *args: Any, **kwargs: Any) -> None:
        for s in self.sinks:
            s.write(*args, **kwargs)

    def flush(self, label: str) -> Path | None:
        out = None
        for s in self.sinks:
            path = s.flush(label)
            out = out or path
        return out

    def close(self) -> None:
        for s in self.sinks:
            s.close()
