"""One poll's messages of a partition -> batches for the loop, and the dead letters that know their Kafka coordinates.

Consecutive messages of one schema share a batch up to ``batch_rows`` rows (a message is never split); one-block
messages (``cross``) share a batch the same way, each marked with a ``block`` column (its offset), so a poll's
blocks go to the block solver together (``kafka.source`` describes the source around it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from streamembed.kafka.codec import decode_message
from streamembed.kafka.event_time import with_message_time
from streamembed.stream.arrow_build import numeric
from streamembed.stream.codecs import DeadRecord
from streamembed.stream.landmark_order import schema_order_key
from streamembed.stream.records import INPUT_BLOCK, INPUT_CROSS, INPUT_DISSIMILARITIES, Reason

__all__ = ["KafkaDeadRecord", "Coordinates", "cut_batches"]


@dataclass
class KafkaDeadRecord(DeadRecord):
    """A dead letter that knows its Kafka coordinates.

    ``row`` is the row index within the message (None for a whole message,
    whose bytes are in ``raw``); ``key`` and ``content_type`` are the original
    message's.
    """

    topic: str = ""
    partition: int = -1
    offset: int = -1
    key: bytes | None = None
    content_type: str | None = None


@dataclass
class Coordinates:
    """Where an input row came from: topic, partition, offset, row index within the message."""

    topic: str
    partition: int
    offset: int
    row: int


@dataclass
class QueuedBatch:
    """A batch cut from one poll, waiting to be handed out (all from one partition)."""

    partition: int
    first_offset: int
    last_offset: int
    block: bool = False
    tables: list[pa.Table] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    msg_rows: list[np.ndarray | None] = field(default_factory=list)
    dead: list[DeadRecord] = field(default_factory=list)
    n_rows: int = 0


def _as_marked_block(table: pa.Table, offset: int) -> pa.Table | None:
    """A one-block message's table with a ``block`` column (its offset) and ``cross`` as a variable-length
    list, so that blocks of different sizes share one schema (and one batch); None if it cannot be."""
    if table.schema.names.count(INPUT_CROSS) != 1:
        return None
    i = table.schema.get_field_index(INPUT_CROSS)
    ctype = table.schema.field(i).type
    try:
        if pa.types.is_fixed_size_list(ctype):
            table = table.set_column(i, INPUT_CROSS, table.column(i).cast(pa.list_(ctype.value_type)))
        return table.append_column(INPUT_BLOCK, numeric(np.full(table.num_rows, offset, np.int64)))
    except (pa.ArrowException, ValueError, TypeError):
        return None


def _same_order(a: pa.Schema, b: pa.Schema) -> bool:
    """Do two messages' schemas name the same landmark order in their metadata (``stream.landmark_order``)?

    Concatenated tables keep the first one's metadata, so messages naming
    different orders must not share a batch.
    """
    return schema_order_key(a, INPUT_DISSIMILARITIES) == schema_order_key(b, INPUT_DISSIMILARITIES)


def cut_batches(partition: int, recs: list[Any], batch_rows: int,
                make_dead: Callable[[DeadRecord, int, Any, str], KafkaDeadRecord],
                max_message_bytes: int | None = None, event_time: str = "auto") -> list[QueuedBatch]:
    """Decode one partition's messages (consumer records, in offset order) into batches.

    Consecutive messages of one schema share a batch up to ``batch_rows``
    rows: row messages as they are, block messages (one block each) with a
    ``block`` column naming the message's offset, so that the batch's blocks
    are placed in one solver call. A message that carries its own ``block``
    column (several blocks) is a batch of its own. Messages that decode to
    no rows contribute their dead letters (``make_dead``) and offsets. A
    message over ``max_message_bytes`` is a ``too_large`` dead letter, undecoded.
    ``event_time`` is the ``kafka.event_time`` mode: whether rows take their
    message's timestamp as event time (:func:`~streamembed.kafka.event_time.with_message_time`).
    """
    out: list[QueuedBatch] = []
    cur: QueuedBatch | None = None

    def close() -> None:
        nonlocal cur
        if cur is not None:
            out.append(cur)
            cur = None

    for rec in recs:
        size = len(rec.value) if rec.value is not None else 0
        if max_message_bytes is not None and size > max_message_bytes:
            from streamembed.kafka.codec import DecodedMessage, header_map

            ctype = header_map(rec.headers).get("content-type", b"").decode("latin-1") or "unknown"
            msg = DecodedMessage(None, ctype, whole=True, dead=[DeadRecord(
                Reason.TOO_LARGE, f"the message is {size:,} bytes, more than kafka.max_partition_fetch_bytes = "
                f"{max_message_bytes:,}: not read", raw=rec.value)])
        else:
            msg = decode_message(rec.value, rec.headers)
        if msg.whole or msg.n_rows == 0:
            if cur is None:
                cur = QueuedBatch(partition, rec.offset, rec.offset)
            cur.last_offset = rec.offset
            cur.dead.extend(make_dead(d, partition, rec, msg.content_type) for d in msg.dead)
            continue
        table = msg.table
        assert table is not None
        table = with_message_time(table, getattr(rec, "timestamp", None), getattr(rec, "timestamp_type", None),
                                  event_time)
        own_blocks = INPUT_BLOCK in table.schema.names
        if msg.block and not own_blocks:
            marked = _as_marked_block(table, rec.offset)
            own_blocks = marked is None  # a strange block message stands alone; decoding says what is wrong
            table = marked if marked is not None else table
        fits = (cur is not None and cur.block == msg.block and not own_blocks
                and (not cur.tables or (cur.n_rows + table.num_rows <= batch_rows
                                        and cur.tables[0].schema.equals(table.schema)
                                        and _same_order(cur.tables[0].schema, table.schema))))
        if not fits:
            close()
            cur = QueuedBatch(partition, rec.offset, rec.offset, block=msg.block)
        assert cur is not None
        cur.tables.append(table)
        cur.offsets.append(rec.offset)
        cur.msg_rows.append(msg.rows)
        cur.n_rows += table.num_rows
        cur.last_offset = rec.offset
        cur.dead.extend(make_dead(d, partition, rec, msg.content_type) for d in msg.dead)
        if own_blocks:
            close()
    close()
    return out
