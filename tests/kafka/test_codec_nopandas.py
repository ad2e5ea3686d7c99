"""The Kafka path's Arrow values built without pandas equal what the pyarrow calls they replace built.

pyarrow imports pandas on ``pa.array``/``pa.scalar`` of Python values and on zoned timestamps turned into Python;
the codec, the batch cutter and the event-time filler now use :mod:`streamembed.stream.arrow_build`. Each test
compares with the old expression on edge cases (no rows, nulls, other units and zones, string event times), so
that outputs stay bit-identical (tests/design/test_imports.py checks that pandas stays out).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from streamembed.kafka.batches import _as_marked_block
from streamembed.kafka.codec import arrow_message, decode_message, output_json_messages
from streamembed.kafka.event_time import with_message_time
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.output import schema_version_of
from streamembed.stream.records import INPUT_BLOCK, INPUT_EVENT_TIME, INPUT_LANDMARK_VERSION, TIMESTAMP_TYPE

from ..stream.helpers import dissimilarities, fitted_model, input_table, objects

TS = 1_700_000_000_123  # ms


def _old_json_messages(batch: pa.Table) -> list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]:
    """output_json_messages as it was: ``to_pylist`` (which imports pandas for zoned timestamps)."""
    def value(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v.isoformat() if isinstance(v, datetime) else v

    out = []
    for row in batch.to_pylist():
        doc = {k: value(v) for k, v in row.items()}
        rid = doc.get("id")
        headers = [("content-type", b"application/json"), ("streamembed-schema-version",
                                                            str(schema_version_of(batch.schema)).encode())]
        if doc.get("model_version") is not None:
            headers.append(("streamembed-model-version", str(doc["model_version"]).encode()))
        out.append((rid.encode() if rid is not None else None, json.dumps(doc, separators=(",", ":")).encode(),
                    headers))
    return out


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("m", [1, 7])
def test_json_output_messages_are_byte_identical(version: int, m: int) -> None:
    A = dissimilarities(objects(m, seed=m))
    table = input_table([f"o{i}" for i in range(m)], A, event_time=False)
    # event times: none on row 1, a whole second on row 0, microseconds elsewhere
    us = np.arange(m, dtype=np.int64) * 1_234_567 + 1_600_000_000_000_000
    table = table.append_column(INPUT_EVENT_TIME, pa.array(us, mask=np.arange(m) == 1).cast(TIMESTAMP_TYPE))
    out = BatchEmbedder(fitted_model().model_, output_version=version).process(table).output
    for part in (out, out.slice(1), out.slice(0, 0)):
        assert list(output_json_messages(part)) == _old_json_messages(part)
    assert json.loads(next(output_json_messages(out))[1])["event_time"] == "2020-09-13T12:26:40+00:00"


def test_landmark_version_header_column_equals_pa_array() -> None:
    for m in (0, 1, 5):
        value, headers = arrow_message(input_table([f"a{i}" for i in range(m)], dissimilarities(objects(m))),
                                       landmark_version=7)
        col = decode_message(value, headers).table.column(INPUT_LANDMARK_VERSION)
        assert col.equals(pa.chunked_array([pa.array(np.full(m, 7, dtype=np.int64))]))


def test_block_marker_column_equals_pa_array() -> None:
    A = dissimilarities(objects(3))
    table = input_table(["a", "b", "c"], A, cross=np.ones((3, 3)))
    marked = _as_marked_block(table, 41)
    assert marked is not None
    assert marked.column(INPUT_BLOCK).equals(pa.chunked_array([pa.array(np.full(3, 41, np.int64))]))


def _old_fill(table: pa.Table, timestamp_ms: int) -> pa.Table:
    """The event-time filler as it was (pa.array / pa.scalar)."""
    names = table.schema.names
    if INPUT_EVENT_TIME not in names:
        col = pa.array(np.full(table.num_rows, int(timestamp_ms) * 1000, dtype=np.int64)).cast(TIMESTAMP_TYPE)
        return table.append_column(INPUT_EVENT_TIME, col)
    i = names.index(INPUT_EVENT_TIME)
    col = table.column(i)
    t = col.type
    if pa.types.is_timestamp(t):
        value = pa.scalar(int(timestamp_ms) * 1000, pa.int64()).cast(pa.timestamp("us", tz=t.tz)).cast(t)
    else:
        when = datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC)
        value = pa.scalar(when.isoformat(timespec="milliseconds"), t)
    return table.set_column(i, INPUT_EVENT_TIME, pc.fill_null(col, value))


_EVENT_TYPES = [pa.timestamp("us", tz="UTC"), pa.timestamp("ms", tz="Europe/Paris"), pa.timestamp("us"),
                pa.timestamp("ns", tz="UTC"), pa.string(), pa.large_string()]


@pytest.mark.parametrize("type", _EVENT_TYPES)
@pytest.mark.parametrize("m", [0, 1, 4])
def test_event_time_fill_equals_the_old_fill(type: pa.DataType, m: int) -> None:
    base = pa.table({"id": pa.array([f"a{i}" for i in range(m)], pa.string())})
    assert with_message_time(base, TS, 0, "auto").equals(_old_fill(base, TS))
    if pa.types.is_timestamp(type):
        own = pa.array([None if i % 2 else 1_600_000_000_000_000 + 1000 * i for i in range(m)], pa.int64())
        own = own.cast(pa.timestamp("us", tz=type.tz)).cast(type)
    else:
        own = pa.array([None if i % 2 else f"2020-09-13T12:26:4{i}Z" for i in range(m)], type)
    table = base.append_column(INPUT_EVENT_TIME, own)
    got = with_message_time(table, TS, 0, "auto")
    assert got.equals(_old_fill(table, TS))
    assert got.column(INPUT_EVENT_TIME).null_count == 0
