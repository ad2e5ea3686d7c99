"""Event time of Kafka rows: the record's own ``event_time``, or the message timestamp (``kafka.event_time``).

Every Kafka message carries a timestamp: the producer's clock when it was
created (``CreateTime``, the default of every client) or the broker's when it
was appended (``LogAppendTime``, a topic setting). A plain producer sends no
``event_time`` field, so without the message timestamp the end-to-end latency
(``processed_at - event_time``: the latency histogram, its Grafana panel and
the ``StreamembedLatencyP99High`` alert) would never be observed. Modes:

============== ============================================================
``auto``       the record's ``event_time`` where it has one, else the
               message timestamp (whatever its type)
``record``     the record's ``event_time`` only (rows without one have none)
``create_time`` the message timestamp when it is a CreateTime, replacing the
               record's; a LogAppendTime message's rows have none
``log_append_time`` the same for LogAppendTime (the time the broker took the
               message: latency then includes no producer-side wait)
``none``       no event time at all: output ``event_time`` null, latency not
               observed
============== ============================================================

One call per message, vectorised over its rows (a whole column, or a
``fill_null`` of the record's).
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamembed.config.schema import EVENT_TIME_MODES
from streamembed.stream.arrow_build import scalar, strings, timestamps
from streamembed.stream.records import INPUT_EVENT_TIME, TIMESTAMP_TYPE

__all__ = ["CREATE_TIME", "EVENT_TIME_MODES", "LOG_APPEND_TIME", "with_message_time"]

#: Kafka's timestamp types (``ConsumerRecord.timestamp_type``).
CREATE_TIME, LOG_APPEND_TIME = 0, 1
_WANTED_TYPE = {"create_time": CREATE_TIME, "log_append_time": LOG_APPEND_TIME}


def _drop(table: pa.Table) -> pa.Table:
    return table.drop_columns([INPUT_EVENT_TIME]) if INPUT_EVENT_TIME in table.schema.names else table


def _set(table: pa.Table, timestamp_ms: int) -> pa.Table:
    """``table`` whose ``event_time`` is the message timestamp on every row."""
    col = timestamps(np.full(table.num_rows, int(timestamp_ms) * 1000, dtype=np.int64), TIMESTAMP_TYPE)
    names = table.schema.names
    if INPUT_EVENT_TIME in names:
        return table.set_column(names.index(INPUT_EVENT_TIME), INPUT_EVENT_TIME, col)
    return table.append_column(INPUT_EVENT_TIME, col)


def _fill(table: pa.Table, timestamp_ms: int) -> pa.Table:
    """``table`` whose rows without an ``event_time`` take the message timestamp (the others keep theirs)."""
    names = table.schema.names
    if INPUT_EVENT_TIME not in names:
        return _set(table, timestamp_ms)
    i = names.index(INPUT_EVENT_TIME)
    col = table.column(i)
    t = col.type
    if pa.types.is_null(t):
        return _set(table, timestamp_ms)
    if not col.null_count:
        return table
    if pa.types.is_timestamp(t):
        value = scalar(int(timestamp_ms) * 1000, pa.int64()).cast(pa.timestamp("us", tz=t.tz)).cast(t)
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        when = datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC)
        value = strings([when.isoformat(timespec="milliseconds")]).cast(t)[0]
    else:
        return table  # a column of another type: decoding refuses it and says why
    return table.set_column(i, INPUT_EVENT_TIME, pc.fill_null(col, value))


def with_message_time(table: pa.Table, timestamp_ms: int | None, timestamp_type: int | None, mode: str) -> pa.Table:
    """The rows of one message with the event time ``mode`` gives them (see the module doc).

    ``timestamp_ms`` is the message timestamp (ms since the Unix epoch; None
    or <= 0: the message has none), ``timestamp_type`` its type (0 CreateTime,
    1 LogAppendTime, None unknown).
    """
    if mode == "record":
        return table
    if mode == "none":
        return _drop(table)
    known = timestamp_ms is not None and timestamp_ms > 0
    if mode == "auto":
        return _fill(table, timestamp_ms) if known else table  # type: ignore[arg-type]
    if mode not in _WANTED_TYPE:
        raise ValueError(f"kafka.event_time must be one of {EVENT_TIME_MODES}, got {mode!r}")
    if known and timestamp_type == _WANTED_TYPE[mode]:
        return _set(table, timestamp_ms)  # type: ignore[arg-type]
    return _drop(table)
