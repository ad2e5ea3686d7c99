"""The output topic and the dead-letter topic, as loop sinks (``stream.sinks.base``).

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

Sizes (:mod:`~streamembed.kafka.limits`): every message is measured before it
is sent against ``max_message_bytes`` (``kafka.max_request_size``, lowered to
the topic's ``max.message.bytes`` where the broker says it). Arrow output is
split by rows until each message fits; a single row that still does not fit
(an id of megabytes) is refused as a ``too_large`` dead letter. A dead letter
that does not fit keeps its headers and a cut value, with
``streamembed-truncated-from`` (the value's length) and
``streamembed-full-record`` (the dead-letter file that holds the whole record,
``spill``). A message the broker refuses for its size after all (its limit
was not known) is split or cut the same way, below the size it refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path
from collections.abc import Callable, Sequence

import pyarrow as pa

from streamembed.kafka.client import KafkaDeliveryError
from streamembed.kafka.producer import ReliableProducer
from streamembed.kafka.codec import (
    CONTENT_TYPE_HEADER,
    JSON_CONTENT_TYPE,
    arrow_rows_per_message,
    output_arrow_message,
    output_json_messages,
)
from streamembed.kafka.limits import FULL_RECORD_HEADER, TRUNCATED_HEADER, fit_header, fit_value, fits, message_size
from streamembed.kafka.batches import Coordinates, KafkaDeadRecord
from streamembed.stream.codecs import DeadRecord, row_as_json
from streamembed.stream.records import Reason
from streamembed.stream.sinks.base import DeadSink, OutputSink, Pending

__all__ = ["KafkaOutputSink", "KafkaDeadLetterSink", "dead_letter_headers", "DLQ_HEADERS"]

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
    TRUNCATED_HEADER,
    FULL_RECORD_HEADER,
)
#: The smallest message limit a size refusal can lower a sink's limit to (bytes).
_MIN_LIMIT = 4096
_DETAIL_LIMIT = 2000


class _TopicSink:
    """What every topic sink does on ``flush``: return when every row written so far is acknowledged."""

    _pending: Pending
    producer: ReliableProducer

    def flush(self, label: str) -> Path | None:
        """Return when every row written so far is acknowledged by the broker."""
        self.producer.flush()
        self._pending.clear()
        return None

    def close(self) -> None:
        self._pending.clear()


#: refuse(dead records, model version, label): where rows that no message can hold go (the dead-letter sink)
Refuse = Callable[[list[DeadRecord], "int | None", str], None]


class KafkaOutputSink(_TopicSink, OutputSink):
    """Embedded rows to ``topic`` as Arrow IPC or JSON messages (see the module doc).

    ``refuse`` receives the rows no message under ``max_message_bytes`` can
    hold, as ``too_large`` dead letters; without it such a row raises
    :class:`KafkaDeliveryError`.
    """

    def __init__(self, producer: ReliableProducer, topic: str, *, fmt: str = "arrow",
                 max_message_bytes: int = 1 << 20, refuse: Refuse | None = None) -> None:
        if fmt not in ("arrow", "json"):
            raise ValueError(f"output format must be 'arrow' or 'json', got {fmt!r}")
        self.producer = producer
        self.topic = topic
        self.fmt = fmt
        self.max_message_bytes = int(max_message_bytes)
        self.refuse = refuse
        self.refused = 0
        self._label = ""
        super().__init__()

    def write(self, data: pa.RecordBatch | pa.Table, label: str) -> None:
        if data.num_rows == 0:
            return
        self._label = label
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        if self.fmt == "arrow":
            step = arrow_rows_per_message(table, self.max_message_bytes)
            for start in range(0, table.num_rows, step):
                self._send_arrow(table.slice(start, step))
        else:
            for i, (key, value, headers) in enumerate(output_json_messages(table)):
                self._send_row(table.slice(i, 1), key, value, headers)
        self._pending.add(data.num_rows)

    def _send_arrow(self, part: pa.Table) -> None:
        key, value, headers = output_arrow_message(part)
        if fits(key, value, headers, self.max_message_bytes):
            self.producer.send(self.topic, value, key=key, headers=headers,
                               on_too_large=lambda size: self._rejected(part, size))
        elif part.num_rows > 1:
            half = part.num_rows // 2
            self._send_arrow(part.slice(0, half))
            self._send_arrow(part.slice(half))
        else:
            self._refuse(part, message_size(key, value, headers))

    def _send_row(self, row: pa.Table, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        if fits(key, value, headers, self.max_message_bytes):
            self.producer.send(self.topic, value, key=key, headers=headers,
                               on_too_large=lambda size: self._rejected(row, size))
        else:
            self._refuse(row, message_size(key, value, headers))

    def _rejected(self, part: pa.Table, size: int) -> None:
        """The broker refused a message of ``size`` bytes: lower the limit below it and send ``part`` again."""
        self.max_message_bytes = max(_MIN_LIMIT, min(self.max_message_bytes, size * 3 // 4))
        if self.fmt == "arrow":
            self._send_arrow(part)
        else:
            (key, value, headers), = output_json_messages(part)
            self._send_row(part, key, value, headers)

    def _refuse(self, part: pa.Table, size: int) -> None:
        detail = (f"its output message would be {size:,} bytes; {self.topic} takes at most "
                  f"{self.max_message_bytes:,} (kafka.max_request_size or the topic's max.message.bytes)")
        if self.refuse is None:
            raise KafkaDeliveryError(f"an output row cannot be produced to {self.topic}: {detail}")
        ids = part.column("id").to_pylist()
        version = part.column("model_version")[0].as_py() if "model_version" in part.schema.names else None
        dead = [DeadRecord(Reason.TOO_LARGE, detail, id=rid if isinstance(rid, str) else None,
                           record=row_as_json(part, i)) for i, rid in enumerate(ids)]
        self.refused += len(dead)
        self.refuse(dead, version, self._label)


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
        h.append(("streamembed-id", fit_header(d.id.encode("utf-8", "replace"))))
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


class KafkaDeadLetterSink(_TopicSink, DeadSink):
    """Dead letters to ``topic`` (default ``<input>.dlq``).

    Value: the original message bytes when the whole message was refused, or
    the refused row as JSON text; key: the original message key, or the
    row's id. ``locate(label, row)`` (the source's) resolves the coordinates
    of rows refused by the embedder. A dead letter larger than
    ``max_message_bytes`` is written whole to ``spill`` (a file dead-letter
    sink; ``spill_path(label)`` is the file it publishes) and sent cut to fit,
    naming that file (see the module doc).
    """

    def __init__(self, producer: ReliableProducer, topic: str,
                 locate: Callable[[str | None, int | None], Coordinates | None] | None = None, *,
                 max_message_bytes: int = 1 << 20, spill: DeadSink | None = None,
                 spill_path: Callable[[str], Path] | None = None) -> None:
        self.producer = producer
        self.topic = topic
        self.locate = locate
        self.max_message_bytes = int(max_message_bytes)
        self.spill = spill
        self.spill_path = spill_path
        self.truncated = 0
        super().__init__()

    def write(self, dead: Sequence[DeadRecord], label: str, *, model_version: int | None,
              source: str | None = None) -> None:
        if not dead:
            return
        now = datetime.now(UTC).isoformat()
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
                key = d.id.encode("utf-8", "replace") if d.id is not None else key
            key = fit_header(key) if key is not None else None
            headers = dead_letter_headers(d, where, model_version=model_version, failed_at=now)
            self._send(_Letter(d, key, value, headers, label, model_version, source))
        self._pending.add(len(dead))

    def _send(self, letter: _Letter) -> None:
        value, headers = letter.value, letter.headers
        if not fits(letter.key, value, headers, self.max_message_bytes):
            value, headers = self._cut(letter)
        self.producer.send(self.topic, value, key=letter.key, headers=headers,
                           on_too_large=lambda size: self._rejected(letter, size))

    def _cut(self, letter: _Letter) -> tuple[bytes, list[tuple[str, bytes]]]:
        """The value cut to fit, with headers saying so and where the whole record is.

        The whole record is published at once, in a file of its own named after the batch's label and the
        record's digest (a restart that cuts it again writes the same file): the file exists before the
        cut dead letter is sent, so no dead letter names a file that a crash kept from being published.
        """
        headers = list(letter.headers) + [(TRUNCATED_HEADER, str(len(letter.value)).encode())]
        if self.spill is not None:
            name = f"{letter.label}-{hashlib.sha256(letter.value).hexdigest()[:16]}"
            if not letter.spilled:
                self.spill.write([letter.dead], name, model_version=letter.model_version, source=letter.source)
                self.spill.flush(name)
                letter.spilled = True
            if self.spill_path is not None:
                headers.append((FULL_RECORD_HEADER, str(self.spill_path(name)).encode("utf-8", "replace")))
        self.truncated += 1
        return fit_value(letter.key, letter.value, headers, self.max_message_bytes), headers

    def _rejected(self, letter: _Letter, size: int) -> None:
        """The broker refused a dead letter of ``size`` bytes: lower the limit below it and send it cut."""
        if size <= _MIN_LIMIT:
            raise KafkaDeliveryError(f"the broker refuses even a {size}-byte dead letter on {self.topic} as too large")
        self.max_message_bytes = max(_MIN_LIMIT, min(self.max_message_bytes, size * 3 // 4))
        self._send(letter)

    def flush(self, label: str) -> Path | None:
        """Return when every dead letter written so far is acknowledged (cut ones' files are published already)."""
        self.producer.flush()
        self._pending.clear()
        return None

    def close(self) -> None:
        if self.spill is not None:
            self.spill.close()
        self._pending.clear()


@dataclass
class _Letter:
    """One dead letter on its way: the record, and the message made of it."""

    dead: DeadRecord
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    label: str
    model_version: int | None
    source: str | None
    spilled: bool = False
