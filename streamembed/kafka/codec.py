"""One Kafka message <-> rows: Arrow IPC streams and JSON, with their headers.

Input messages (the value; headers optional):

* ``content-type: application/vnd.apache.arrow.stream`` - one self-contained
  Arrow IPC *stream* (schema, one or more record batches, end-of-stream) in
  the input record format of :mod:`streamembed.stream.records`. Decoded
  zero-copy: the table's buffers point into the message bytes. A ``cross``
  column makes the message one block.
* ``content-type: application/json`` - one object, a list of objects, or
  ``{"objects": [...]}`` with optional ``"cross": [[...], ...]`` (k x k: the
  objects are one block) and ``"landmarks": [...]`` (the landmark order of
  every object that does not name its own). Parsed by the JSON-lines parser
  of the file daemon (same checks, same dead letters).
* no content-type: sniffed (the Arrow stream's continuation marker
  ``ff ff ff ff``, or ``{`` / ``[``).
* ``streamembed-schema-version`` (optional): the input format version; only
  :data:`INPUT_SCHEMA_VERSION` is read, another version is dead-lettered.
* ``streamembed-landmark-version`` (optional): the model version whose
  landmark order every row follows (a ``landmark_version`` column, when
  present, wins); rows are checked against the served versions downstream.

Rows may name their landmark order as in files (``stream.landmark_order``):
a ``landmarks`` list per JSON object, or ``streamembed.landmarks`` in the
Arrow stream's field or schema metadata.

Row validation (ids, lengths, numbers, landmark versions and orders) is *not* done here:
the embedder's :func:`streamembed.stream.codecs.decode_batch` does it for
every source. This module only refuses messages it cannot turn into rows.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from streamembed.stream.arrow_build import numeric, rows
from streamembed.stream.codecs import DeadRecord
from streamembed.stream.output import schema_version_of
from streamembed.stream.readers import parse_json_lines
from streamembed.stream.records import (
    INPUT_CROSS,
    INPUT_LANDMARK_VERSION,
    INPUT_LANDMARKS,
    SCHEMA_VERSION,
    SCHEMA_VERSION_KEY,
    Reason,
)

__all__ = [
    "ARROW_CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "CONTENT_TYPE_HEADER",
    "SCHEMA_VERSION_HEADER",
    "LANDMARK_VERSION_HEADER",
    "MODEL_VERSION_HEADER",
    "INPUT_SCHEMA_VERSION",
    "DecodedMessage",
    "header_map",
    "decode_message",
    "encode_arrow",
    "arrow_message",
    "json_message",
    "output_arrow_messages",
    "output_arrow_message",
    "output_json_messages",
]

ARROW_CONTENT_TYPE = "application/vnd.apache.arrow.stream"
JSON_CONTENT_TYPE = "application/json"
CONTENT_TYPE_HEADER = "content-type"
SCHEMA_VERSION_HEADER = "streamembed-schema-version"
LANDMARK_VERSION_HEADER = "streamembed-landmark-version"
MODEL_VERSION_HEADER = "streamembed-model-version"

#: The version of the input message format this streamembed reads.
INPUT_SCHEMA_VERSION = 1

_JSON_TYPES = ("application/json", "text/json", "application/x-ndjson", "application/jsonl")
_ARROW_TYPES = (ARROW_CONTENT_TYPE, "application/vnd.apache.arrow", "application/x-arrow-stream")
_ARROW_MARKER = b"\xff\xff\xff\xff"


@dataclass
class DecodedMessage:
    """Rows of one message, or why it was refused.

    ``table`` holds the rows that could be parsed (None if none); ``rows``
    gives each table row's index within the message when some were refused
    while parsing (JSON), else None. ``dead`` holds the refused rows (their
    ``row`` is the index within the message) or, when ``whole`` is True, one
    record for the whole message (its ``raw`` is the message value).
    """

    table: pa.Table | None
    content_type: str
    block: bool = False
    dead: list[DeadRecord] = field(default_factory=list)
    rows: np.ndarray | None = None
    whole: bool = False

    @property
    def n_rows(self) -> int:
        return 0 if self.table is None else self.table.num_rows


def header_map(headers: Sequence[tuple[str, bytes]] | None) -> dict[str, bytes]:
    """Headers as a dict with lower-case keys (the last of duplicate keys wins)."""
    return {str(k).lower(): (v if v is not None else b"") for k, v in (headers or ())}


def _refuse(value: bytes | None, content_type: str, reason: str, detail: str) -> DecodedMessage:
    return DecodedMessage(None, content_type, dead=[DeadRecord(reason, detail, raw=value)], whole=True)


def _int_header(h: Mapping[str, bytes], name: str) -> tuple[int | None, str | None]:
    raw = h.get(name)
    if raw is None:
        return None, None
    try:
        value = int(raw.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        return None, f"header {name} = {raw[:40]!r} is not an integer"
    if not -(1 << 63) <= value < (1 << 63):
        return None, f"header {name} = {raw[:40]!r} is out of range (a 64-bit integer)"
    return value, None


def _content_type(h: Mapping[str, bytes], value: bytes) -> str:
    ct = h.get(CONTENT_TYPE_HEADER)
    if ct is not None:
        text = ct.decode("latin-1").split(";", 1)[0].strip().lower()
        if text in _ARROW_TYPES:
            return ARROW_CONTENT_TYPE
        if text in _JSON_TYPES:
            return JSON_CONTENT_TYPE
        return text or "unknown"
    if value[:4] == _ARROW_MARKER:
        return ARROW_CONTENT_TYPE
    if value.lstrip()[:1] in (b"{", b"["):
        return JSON_CONTENT_TYPE
    return "unknown"


def decode_message(value: bytes | None, headers: Sequence[tuple[str, bytes]] | None = None) -> DecodedMessage:
    """Decode one message value (see the module doc); never raises on bad input."""
    h = header_map(headers)
    if not value:
        return _refuse(b"", "unknown", Reason.UNDECODABLE, "empty message (no value)")
    ctype = _content_type(h, value)
    version, problem = _int_header(h, SCHEMA_VERSION_HEADER)
    if problem is None and version is not None and version != INPUT_SCHEMA_VERSION:
        problem = (f"{SCHEMA_VERSION_HEADER} {version} is not supported (this streamembed reads "
                   f"version {INPUT_SCHEMA_VERSION})")
    if problem is not None:
        return _refuse(value, ctype, Reason.UNDECODABLE, problem)
    landmark_version, problem = _int_header(h, LANDMARK_VERSION_HEADER)
    if problem is not None:
        return _refuse(value, ctype, Reason.UNKNOWN_LANDMARK_VERSION, problem)
    if ctype == ARROW_CONTENT_TYPE:
        msg = _decode_arrow(value)
    elif ctype == JSON_CONTENT_TYPE:
        msg = _decode_json(value)
    else:
        return _refuse(value, ctype, Reason.UNDECODABLE,
                       f"unsupported content-type {ctype!r} (expected {ARROW_CONTENT_TYPE} or {JSON_CONTENT_TYPE})")
    if landmark_version is not None and msg.table is not None and INPUT_LANDMARK_VERSION not in msg.table.schema.names:
        col = numeric(np.full(msg.table.num_rows, landmark_version, dtype=np.int64))
        msg.table = msg.table.append_column(INPUT_LANDMARK_VERSION, col)
    return msg


def _decode_arrow(value: bytes) -> DecodedMessage:
    try:
        reader = ipc.open_stream(pa.py_buffer(value))
        table = reader.read_all()
    except (pa.ArrowException, ValueError, OSError) as exc:
        return _refuse(value, ARROW_CONTENT_TYPE, Reason.UNDECODABLE, f"not a readable Arrow IPC stream: {exc}")
    meta = table.schema.metadata or {}
    stated = meta.get(SCHEMA_VERSION_KEY.encode())
    if stated is not None and stated != str(SCHEMA_VERSION).encode():
        return _refuse(value, ARROW_CONTENT_TYPE, Reason.UNDECODABLE,
                       f"schema metadata {SCHEMA_VERSION_KEY} = {stated.decode('latin-1')!r} is not supported "
                       f"(this streamembed reads {SCHEMA_VERSION})")
    block = INPUT_CROSS in table.schema.names and not pa.types.is_null(table.schema.field(INPUT_CROSS).type)
    return DecodedMessage(table, ARROW_CONTENT_TYPE, block=block)


def _decode_json(value: bytes) -> DecodedMessage:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _refuse(value, JSON_CONTENT_TYPE, Reason.UNDECODABLE, f"not UTF-8: {exc}")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        what = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return _refuse(value, JSON_CONTENT_TYPE, Reason.UNDECODABLE, f"not JSON: {what}")
    if isinstance(doc, dict) and "objects" in doc:
        objects = doc["objects"]
        if not isinstance(objects, list):
            return _refuse(value, JSON_CONTENT_TYPE, Reason.UNDECODABLE, "'objects' must be a list of objects")
        cross = doc.get(INPUT_CROSS)
        if cross is not None:
            k = len(objects)
            if not (isinstance(cross, list) and len(cross) == k and all(isinstance(r, list) for r in cross)
                    and all(isinstance(o, dict) for o in objects)):
                return _refuse(value, JSON_CONTENT_TYPE, Reason.BAD_BLOCK,
                               f"'cross' must be a {k} x {k} matrix (a list of {k} lists) over {k} objects")
            objects = [{**o, INPUT_CROSS: row} for o, row in zip(objects, cross, strict=True)]
        order = doc.get(INPUT_LANDMARKS)
        if order is not None:  # the shared order; an object's own wins (a bad one is refused row by row)
            objects = [{INPUT_LANDMARKS: order, **o} if isinstance(o, dict) else o for o in objects]
    elif isinstance(doc, dict):
        objects = [doc]
    elif isinstance(doc, list):
        objects = doc
    else:
        return _refuse(value, JSON_CONTENT_TYPE, Reason.UNDECODABLE,
                       f"a JSON message must be an object, a list of objects or {{\"objects\": [...]}}, "
                       f"got {type(doc).__name__}")
    if not objects:
        return DecodedMessage(None, JSON_CONTENT_TYPE)
    # one compact line per object: the JSON-lines parser does the rest (and its dead letters)
    lines = [json.dumps(o, allow_nan=True, separators=(",", ":")).encode("utf-8") + b"\n" for o in objects]
    chunk = parse_json_lines(lines, 0, "")
    for d in chunk.dead:
        d.file = None
    table = chunk.table
    block = table is not None and INPUT_CROSS in table.schema.names
    if block and chunk.dead:
        # a block is all or nothing: a member refused while parsing fails the block
        first = chunk.dead[0]
        detail = f"block member at row {first.row} failed ({first.reason}: {first.detail})"
        return _refuse(value, JSON_CONTENT_TYPE, Reason.BAD_BLOCK, detail)
    rows = chunk.rows if chunk.dead else None
    return DecodedMessage(table, JSON_CONTENT_TYPE, block=block, dead=chunk.dead, rows=rows)


# --------------------------------------------------------------------------- encoding


def encode_arrow(data: pa.Table | pa.RecordBatch) -> bytes:
    """``data`` as one self-contained Arrow IPC stream (schema, batches, end-of-stream)."""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, data.schema) as writer:
        if isinstance(data, pa.Table):
            writer.write_table(data)
        else:
            writer.write_batch(data)
    return sink.getvalue().to_pybytes()


def arrow_message(data: pa.Table | pa.RecordBatch, *, landmark_version: int | None = None,
                  schema_version: int | None = INPUT_SCHEMA_VERSION) -> tuple[bytes, list[tuple[str, bytes]]]:
    """(value, headers) of an Arrow input message (for producers, tests and benchmarks)."""
    headers = [(CONTENT_TYPE_HEADER, ARROW_CONTENT_TYPE.encode())]
    if schema_version is not None:
        headers.append((SCHEMA_VERSION_HEADER, str(schema_version).encode()))
    if landmark_version is not None:
        headers.append((LANDMARK_VERSION_HEADER, str(landmark_version).encode()))
    return encode_arrow(data), headers


def json_message(doc: Any, *, landmark_version: int | None = None,
                 schema_version: int | None = INPUT_SCHEMA_VERSION) -> tuple[bytes, list[tuple[str, bytes]]]:
    """(value, headers) of a JSON input message: an object, a list, or {"objects": [...], "cross": ...}."""
    headers = [(CONTENT_TYPE_HEADER, JSON_CONTENT_TYPE.encode())]
    if schema_version is not None:
        headers.append((SCHEMA_VERSION_HEADER, str(schema_version).encode()))
    if landmark_version is not None:
        headers.append((LANDMARK_VERSION_HEADER, str(landmark_version).encode()))
    return json.dumps(doc).encode("utf-8"), headers


def _output_headers(content_type: str, model_version: int | None, version: int) -> list[tuple[str, bytes]]:
    headers = [(CONTENT_TYPE_HEADER, content_type.encode()), (SCHEMA_VERSION_HEADER, str(version).encode())]
    if model_version is not None:
        headers.append((MODEL_VERSION_HEADER, str(model_version).encode()))
    return headers


def output_arrow_messages(batch: pa.RecordBatch | pa.Table, max_bytes: int
                          ) -> Iterator[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]:
    """(key, value, headers) Arrow messages of output rows, each under ``max_bytes``.

    Keyed by the first row's id (the rows of one input batch travel together;
    see docs/kafka.md for why). ``streamembed-model-version`` is the first row's
    model version (every row also carries its own).
    """
    n = batch.num_rows
    if n == 0:
        return
    for start in range(0, n, (step := arrow_rows_per_message(batch, max_bytes))):
        yield output_arrow_message(batch.slice(start, step))


def arrow_rows_per_message(batch: pa.RecordBatch | pa.Table, max_bytes: int) -> int:
    """Rows per Arrow output message so that one is about 90 % of ``max_bytes`` (from the average row size)."""
    n = batch.num_rows
    per_row = max(1, batch.nbytes // max(n, 1))
    return max(1, min(n, int(max_bytes * 0.9 - 4096) // per_row))


def output_arrow_message(part: pa.RecordBatch | pa.Table) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) of one Arrow output message holding all of ``part``'s rows."""
    first_id = part.column("id")[0].as_py()
    version = part.column("model_version")[0].as_py()
    return (first_id.encode("utf-8") if first_id is not None else None, encode_arrow(part),
            _output_headers(ARROW_CONTENT_TYPE, version, schema_version_of(part.schema)))


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, datetime):
        return v.isoformat()
    return v


def output_json_messages(
        batch: pa.RecordBatch | pa.Table) -> Iterator[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]:
    """(key, value, headers): one JSON object per output row (the output columns by name), keyed by its id."""
    version = schema_version_of(batch.schema)
    for row in rows(batch):  # not batch.to_pylist(): zoned timestamps would import pandas
        doc = {k: _json_value(v) for k, v in row.items()}
        rid = doc.get("id")
        yield (rid.encode("utf-8") if rid is not None else None,
               json.dumps(doc, separators=(",", ":")).encode("utf-8"),
               _output_headers(JSON_CONTENT_TYPE, doc.get("model_version"), version))
