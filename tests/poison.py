"""The poison corpus: what a hostile or sloppy producer sends, each kind with the outcome it must have.

Every :class:`Kind` holds the same malformed input in the two shapes the
daemon reads it in: files for a watched directory (``files``) and Kafka
messages (``messages``, value + headers: an Arrow IPC stream or JSON per
message, see ``streamembed/kafka/codec.py``), with the outcome of each record
in each mode: a dead letter with its reason, or ``EMBEDDED`` for the good
records mixed in. A kind that has no meaning in one mode (a file name that is
not UTF-8, a bad content-type header) has ``None`` there.

Outcomes are located by ``unit`` (which file / message of the kind) and
``row`` (the row in that file or message; ``None`` for a whole file or
message refused at once). Ids are unique across the corpus: ``<kind>.<unit>.<i>``.

The test helpers :func:`write_corpus` and :func:`corpus_messages` lay the
corpus out with one good record after every kind (``<kind>.after``), in an
order the daemon follows (oldest modification time first; one partition),
so a kind that stalls the stream shows as a missing good record.

``python -m tests.poison`` prints the kinds, per mode.
"""

from __future__ import annotations

import io
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from scipy.spatial.distance import cdist

from streamembed.kafka.codec import ARROW_CONTENT_TYPE, JSON_CONTENT_TYPE, encode_arrow

from .stream.helpers import N_LANDMARKS, dissimilarities, landmark_points, objects

__all__ = ["EMBEDDED", "MAX_BLOCK_ROWS", "Outcome", "Entry", "Kind", "build_corpus", "write_corpus",
           "corpus_messages", "expected", "good_rows", "jsonl_line"]

#: The outcome of a record that must come out embedded.
EMBEDDED = "embedded"
#: The daemon runs the corpus with ``source.max_block_rows`` = this (the too-large block has one more row).
MAX_BLOCK_ROWS = 16
#: A JSON nesting deep enough to exhaust Python's recursion limit (issue item 1: 5,000 levels).
DEEP = 5000
JSON_HEADERS = [("content-type", JSON_CONTENT_TYPE.encode())]
_FLOAT64 = pa.float64()
ARROW_HEADERS = [("content-type", ARROW_CONTENT_TYPE.encode())]

@dataclass(frozen=True)
class Outcome:
    """What becomes of one record: unit (file/message of the kind), row in it (None: the whole), reason, id."""

    unit: int
    row: int | None
    reason: str
    id: str | None = None


@dataclass
class Entry:
    """One entry of the watched directory: a regular file, or ``kind`` "dir" / "symlink" / "fifo"."""

    name: bytes
    data: bytes = b""
    kind: str = "file"


@dataclass
class Kind:
    name: str
    about: str
    files: list[Entry] | None = None
    file_outcomes: list[Outcome] = field(default_factory=list)
    messages: list[tuple[bytes | None, list[tuple[str, bytes]]]] | None = None
    kafka_outcomes: list[Outcome] = field(default_factory=list)

    def outcomes(self, mode: str) -> list[Outcome]:
        return self.file_outcomes if mode == "file" else self.kafka_outcomes


# ----------------------------------------------------------------------------- building blocks


def good_rows(m: int, seed: int) -> np.ndarray:
    """(m, N_LANDMARKS) float64 dissimilarities of objects near the landmarks."""
    return dissimilarities(objects(m, seed=seed), dtype=np.float64)


def jsonl_line(obj: object) -> bytes:
    return json.dumps(obj, allow_nan=True).encode()


def _good_obj(rid: str, seed: int, **more: object) -> dict[str, object]:
    return {"id": rid, "dissimilarities": good_rows(1, seed)[0].tolist(), **more}


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _arrow_stream(table: pa.Table, chunk: int | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
        for b in table.to_batches(max_chunksize=chunk):
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


def _arrow_file(table: pa.Table, chunk: int | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as w:
        for b in table.to_batches(max_chunksize=chunk):
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


def _fixed(A: np.ndarray, value_type: pa.DataType | None = None) -> pa.Array:
    A = np.ascontiguousarray(A)
    values = pa.array(A.reshape(-1), type=value_type)
    return pa.FixedSizeListArray.from_arrays(values, A.shape[1])


def _varlist(rows: Sequence[Sequence[object] | None], value_type: pa.DataType = _FLOAT64) -> pa.Array:
    return pa.array(rows, pa.list_(value_type))


def _ids(tag: str, m: int) -> list[str]:
    return [f"{tag}.{i}" for i in range(m)]


def _bad_utf8_strings(values: list[bytes]) -> pa.Array:
    """A string array holding exactly these bytes (Arrow IPC does not validate UTF-8)."""
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    data = b"".join(values)
    return pa.Array.from_buffers(pa.string(), len(values), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)])


# ----------------------------------------------------------------------------- kinds made of JSON lines


@dataclass
class L:
    """One JSON line: its bytes, its outcome in a .jsonl file and as its own JSON Kafka message.

    ``whole``: in Kafka the message is refused as a whole (row None; it never became rows), else row 0.
    ``kafka``: explicit (row, reason) outcomes of the message when they differ from the file's.
    """

    data: bytes
    reason: str | None  # None: a blank line (no record)
    id: str | None = None
    whole: bool = False
    kafka: list[tuple[int | None, str]] | None = None


def _json_kind(name: str, about: str, lines: list[L], *, kafka: bool = True, file_name: str | None = None) -> Kind:
    fname = (file_name or f"{name}.jsonl").encode()
    data = b"".join(x.data + b"\n" for x in lines)
    k = Kind(name, about, files=[Entry(fname, data)])
    k.file_outcomes = [Outcome(0, j, x.reason, x.id) for j, x in enumerate(lines) if x.reason is not None]
    if kafka:
        k.messages = []
        for x in lines:
            if x.reason is None:
                continue
            unit = len(k.messages)
            k.messages.append((x.data, JSON_HEADERS))
            outs = x.kafka if x.kafka is not None else [(None if x.whole else 0, x.reason)]
            k.kafka_outcomes += [Outcome(unit, row, reason, x.id if reason == EMBEDDED or row is not None else None)
                                 for row, reason in outs]
    return k


def _one_line(name: str, about: str, obj_or_bytes: object, reason: str, *, whole: bool = False,
              with_id: bool = True, kafka: list[tuple[int | None, str]] | None = None) -> Kind:
    """A kind of one poison line between two good lines (rows 0 and 2)."""
    g0, g2 = f"{name}.0.0", f"{name}.0.2"
    data = obj_or_bytes if isinstance(obj_or_bytes, bytes) else jsonl_line(obj_or_bytes)
    rid = f"{name}.0.1" if with_id else None
    return _json_kind(name, about, [L(jsonl_line(_good_obj(g0, 1)), EMBEDDED, g0),
                                    L(data, reason, rid, whole=whole, kafka=kafka),
                                    L(jsonl_line(_good_obj(g2, 2)), EMBEDDED, g2)])


def json_kinds() -> list[Kind]:
    A = good_rows(1, 3)[0].tolist()
    out: list[Kind] = []

    def one(name: str, about: str, obj: object, reason: str, **kw: object) -> None:
        out.append(_one_line(name, about, obj, reason, **kw))  # type: ignore[arg-type]

    def with_id(name: str, **fields: object) -> dict[str, object]:
        return {"id": f"{name}.0.1", **fields}

    one("json_not_utf8", "bytes that are not UTF-8", b"\xff\xfe\xfa binary junk", "undecodable", whole=True,
        with_id=False)
    one("json_not_json", "text that is not JSON", b"{this is not json", "undecodable", whole=True, with_id=False)
    one("json_truncated_object", "a JSON object cut in the middle (with its newline)",
        jsonl_line(with_id("json_truncated_object", dissimilarities=A))[:-20], "undecodable", whole=True,
        with_id=False)
    deep = b'{"id": "json_deep_vector.0.1", "dissimilarities": ' + b"[" * DEEP + b"]" * DEEP + b"}"
    one("json_deep_vector", "issue item 1: dissimilarities nested 5,000 levels deep", deep, "undecodable",
        whole=True, with_id=False)
    one("json_deep_document", "issue item 1: a document nested 5,000 levels deep", b"[" * DEEP + b"]" * DEEP,
        "undecodable", whole=True, with_id=False)
    # pyarrow's JSON reader parses it (an object without an id); Python's json module cannot
    one("json_deep_object", "5,000 nested objects", b'{"a":' * DEEP + b"1" + b"}" * DEEP, "missing_id",
        with_id=False, kafka=[(None, "undecodable")])
    one("json_list_of_numbers", "a line that is a list of non-objects", b"[1, 2, 3]", "undecodable",
        with_id=False, kafka=[(0, "undecodable"), (1, "undecodable"), (2, "undecodable")])
    one("json_scalar", "a line that is a number", b"42", "undecodable", whole=True, with_id=False,
        kafka=[(None, "undecodable")])
    one("json_string", "a line that is a string", b'"just text"', "undecodable", with_id=False,
        kafka=[(None, "undecodable")])
    one("json_null", "a line that is null (a row without an id)", b"null", "missing_id", with_id=False,
        kafka=[(None, "undecodable")])
    one("json_id_number", "a fractional numeric id", {"id": 12345.5, "dissimilarities": A}, "bad_id", with_id=False)
    one("json_id_list", "an id that is a list", {"id": ["a", "b"], "dissimilarities": A}, "bad_id", with_id=False)
    one("json_id_object", "an id that is an object", {"id": {"x": 1}, "dissimilarities": A}, "bad_id",
        with_id=False)
    one("json_id_bool", "an id that is true", {"id": True, "dissimilarities": A}, "bad_id", with_id=False)
    one("json_id_lone_surrogate", "an id that is a lone UTF-16 surrogate escape (valid JSON, not valid text)",
        b'{"id": "\\ud800", "dissimilarities": ' + json.dumps(A).encode() + b"}", "undecodable", with_id=False)
    one("json_extra_key_lone_surrogate", "an unknown key holding a lone surrogate (valid: ignored)",
        with_id("json_extra_key_lone_surrogate", dissimilarities=A, note="\udfff"), EMBEDDED)
    one("json_time_lone_surrogate", "an event_time holding a lone surrogate", with_id(
        "json_time_lone_surrogate", dissimilarities=A, event_time="\ud800"), "undecodable")
    weird = "json_id_control_chars.0.0 \x00\n\t\u202e\U0001f600"
    out.append(_json_kind("json_id_control_chars", "an id with NUL, newline, tab, a bidi override and an emoji "
                          "(valid)", [L(jsonl_line(_good_obj(weird, 4)), EMBEDDED, weird)]))
    one("json_id_null", "id null", {"id": None, "dissimilarities": A}, "missing_id", with_id=False)
    one("json_id_empty", "id empty", {"id": "", "dissimilarities": A}, "missing_id", with_id=False)
    one("json_id_absent", "no id", {"dissimilarities": A}, "missing_id", with_id=False)
    one("json_vector_strings", "dissimilarities that are strings", with_id("json_vector_strings",
        dissimilarities=["a", "b"] * 6), "non_numeric")
    one("json_vector_numeric_strings", "numbers quoted as strings",
        with_id("json_vector_numeric_strings", dissimilarities=[str(x) for x in A]), "non_numeric")
    one("json_vector_bools", "dissimilarities that are booleans",
        with_id("json_vector_bools", dissimilarities=[True, False] * 6), "non_numeric")
    one("json_vector_nested", "a list of lists", with_id("json_vector_nested", dissimilarities=[[x] for x in A]),
        "non_numeric")
    one("json_vector_object", "an object instead of a list", with_id("json_vector_object",
        dissimilarities={"a": 1.0}), "non_numeric")
    one("json_vector_text", "a comma-separated string", with_id("json_vector_text",
        dissimilarities=",".join(map(str, A))), "non_numeric")
    one("json_vector_null", "dissimilarities null", with_id("json_vector_null", dissimilarities=None),
        "missing_vector")
    one("json_vector_misspelt", "issue: a misspelt key ('dissimilarity')", with_id("json_vector_misspelt",
        dissimilarity=A), "missing_vector")
    one("json_vector_empty", "an empty list", with_id("json_vector_empty", dissimilarities=[]), "wrong_length")
    one("json_vector_short", "one value short", with_id("json_vector_short", dissimilarities=A[:-1]),
        "wrong_length")
    one("json_vector_long", "one value too many", with_id("json_vector_long", dissimilarities=A + [1.0]),
        "wrong_length")
    one("json_vector_nan", "a NaN token", with_id("json_vector_nan", dissimilarities=[float("nan")] + A[1:]),
        "non_finite")
    one("json_vector_infinity", "an Infinity token", with_id("json_vector_infinity",
        dissimilarities=[float("inf")] + A[1:]), "non_finite")
    one("json_vector_overflow", "1e400 (overflows a double)",
        b'{"id": "json_vector_overflow.0.1", "dissimilarities": [1e400, ' + json.dumps(A[1:])[1:].encode() + b"}",
        "non_finite")
    one("json_vector_null_element", "a null inside the list", with_id("json_vector_null_element",
        dissimilarities=[None] + A[1:]), "non_finite")
    one("json_vector_negative", "a negative dissimilarity", with_id("json_vector_negative",
        dissimilarities=[-1.0] + A[1:]), "negative")
    one("json_vector_huge", "issue item 2: 1e100 (finite, but its square overflows)",
        with_id("json_vector_huge", dissimilarities=[1e100] * N_LANDMARKS), "out_of_range")
    one("json_vector_huge_one", "one value of 1e200", with_id("json_vector_huge_one",
        dissimilarities=[1e200] + A[1:]), "out_of_range")
    # 9.96921e36: the netCDF fill value for a missing float, a real producer's "missing"
    one("json_vector_fill_value", "the netCDF fill value 9.96921e36 everywhere (finite, squares finite, meaningless)",
        with_id("json_vector_fill_value", dissimilarities=[9.96921e36] * N_LANDMARKS), "out_of_range")
    one("json_version_unknown", "landmark_version 7 (not served)", with_id("json_version_unknown",
        dissimilarities=A, landmark_version=7), "unknown_landmark_version")
    one("json_version_negative", "landmark_version -1", with_id("json_version_negative", dissimilarities=A,
        landmark_version=-1), "unknown_landmark_version")
    ids = [f"L{i}" for i in range(N_LANDMARKS)]
    one("json_landmarks_unknown", "a landmarks order naming an id the model does not have", with_id(
        "json_landmarks_unknown", dissimilarities=A, landmarks=ids[:-1] + ["L99"]), "landmark_mismatch")
    one("json_landmarks_repeated", "a landmarks order naming L0 twice", with_id(
        "json_landmarks_repeated", dissimilarities=A, landmarks=ids[:-1] + ["L0"]), "landmark_mismatch")
    one("json_landmarks_short", "a landmarks order missing one id", with_id(
        "json_landmarks_short", dissimilarities=A, landmarks=ids[:-1]), "landmark_mismatch")
    one("json_landmarks_not_a_list", "landmarks 'L0' (not a list)", with_id(
        "json_landmarks_not_a_list", dissimilarities=A, landmarks="L0"), "landmark_mismatch")
    one("json_landmarks_numbers", "landmarks of fractions", with_id(
        "json_landmarks_numbers", dissimilarities=A, landmarks=[0.5] * N_LANDMARKS), "landmark_mismatch")
    one("json_version_string", "landmark_version 'one'", with_id("json_version_string", dissimilarities=A,
        landmark_version="one"), "undecodable")
    one("json_version_fraction", "landmark_version 1.5", with_id("json_version_fraction", dissimilarities=A,
        landmark_version=1.5), "undecodable")
    one("json_version_huge", "landmark_version 2**70", with_id("json_version_huge", dissimilarities=A,
        landmark_version=2 ** 70), "undecodable")
    one("json_time_garbage", "issue item 10: an event_time that is not a time", with_id("json_time_garbage",
        dissimilarities=A, event_time="not a time"), "undecodable")
    one("json_time_number", "an event_time that is a number", with_id("json_time_number", dissimilarities=A,
        event_time=12345), "undecodable")
    one("json_time_month_13", "2024-13-45T99:00:00Z", with_id("json_time_month_13", dissimilarities=A,
        event_time="2024-13-45T99:00:00Z"), "undecodable")
    # issue item 10: one bad event_time among 40 rows costs one row
    name = "json_time_one_of_40"
    lines = [L(jsonl_line(_good_obj(f"{name}.0.{i}", 10 + i, event_time="2024-05-01T12:00:00Z")), EMBEDDED,
               f"{name}.0.{i}") for i in range(40)]
    lines[17] = L(jsonl_line(_good_obj(f"{name}.0.17", 27, event_time="yesterday")), "undecodable",
                  f"{name}.0.17")
    out.append(_json_kind(name, "issue item 10: one unparseable event_time in a batch of 40", lines))
    # issue item 10: a stray cross on one line costs that line
    name = "json_stray_cross"
    lines = [L(jsonl_line(_good_obj(f"{name}.0.{i}", 60 + i)), EMBEDDED, f"{name}.0.{i}") for i in range(6)]
    lines[3] = L(jsonl_line(_good_obj(f"{name}.0.3", 63, cross=[0.0, 1.0])), "bad_block", f"{name}.0.3",
                 kafka=[(0, "bad_block")])
    out.append(_json_kind(name, "issue item 10: a `cross` field on one JSON line of six", lines))
    # a first line with cross makes the file one block; its other members lack cross
    name = "json_block_members_without_cross"
    lines = [L(jsonl_line(_good_obj(f"{name}.0.0", 70, cross=[0.0, 1.0, 2.0])), "bad_block", f"{name}.0.0",
               kafka=[(0, "bad_block")])]
    lines += [L(jsonl_line(_good_obj(f"{name}.0.{i}", 70 + i)), "bad_block", f"{name}.0.{i}",
                kafka=[(0, EMBEDDED)]) for i in (1, 2)]
    out.append(_json_kind(name, "a block file whose later members carry no cross", lines))
    # blank lines, CRLF, unknown keys, a very long id: all fine
    name = "json_blank_and_crlf"
    lines = [L(jsonl_line(_good_obj(f"{name}.0.0", 80)), EMBEDDED, f"{name}.0.0"), L(b"", None),
             L(b"   ", None), L(jsonl_line(_good_obj(f"{name}.0.3", 81)) + b"\r", EMBEDDED, f"{name}.0.3"),
             L(jsonl_line(_good_obj(f"{name}.0.4", 82, colour="blue", extra={"a": [1, 2]})), EMBEDDED,
               f"{name}.0.4")]
    out.append(_json_kind(name, "blank lines, a CRLF line, unknown keys (all fine)", lines))
    long_id = "long-" + "x" * 100_000
    out.append(_json_kind("json_long_id", "a 100 kB id (valid)", [L(jsonl_line(_good_obj(long_id, 83)), EMBEDDED,
                                                                     long_id)]))
    # a 10 MB single line: 1.3 M values where 12 are expected
    big = b'{"id": "json_10mb_line.0.0", "dissimilarities": [' + b",".join([b"1.5"] * 2_600_000) + b"]}"
    out.append(_json_kind("json_10mb_line", "a 10 MB single line", [L(big, "wrong_length", "json_10mb_line.0.0")]))
    # a UTF-8 byte-order mark before the first line of a clean file, and of a file with a bad line
    name = "json_bom"
    # (a JSON message with a byte-order mark is refused: RFC 8259 forbids adding one)
    bom = [L(b"\xef\xbb\xbf" + jsonl_line(_good_obj(f"{name}.0.0", 84)), EMBEDDED, f"{name}.0.0",
             kafka=[(None, "undecodable")]),
           L(jsonl_line(_good_obj(f"{name}.0.1", 85)), EMBEDDED, f"{name}.0.1")]
    out.append(_json_kind(name, "a UTF-8 byte-order mark before the first line", bom, kafka=True))
    name = "json_bom_next_to_poison"
    bom = [L(b"\xef\xbb\xbf" + jsonl_line(_good_obj(f"{name}.0.0", 86)), EMBEDDED, f"{name}.0.0",
             kafka=[(None, "undecodable")]),
           L(b"{not json", "undecodable", whole=True)]
    out.append(_json_kind(name, "a byte-order mark before a good line, next to a bad line (same outcome as alone)",
                          bom, kafka=True))
    return out


# ----------------------------------------------------------------------------- kinds made of Arrow tables


Builder = Callable[[str], tuple[pa.Table, list[tuple[str, str | None]]]]


def _table_kind(name: str, about: str, build: Builder, *, formats: Sequence[str] = ("parquet", "arrows"),
                kafka: bool = True) -> Kind:
    """One table per file format (.parquet, .arrows, .arrow) and one Arrow message; row outcomes per row."""
    k = Kind(name, about, files=[])
    assert k.files is not None
    for unit, fmt in enumerate(formats):
        table, outs = build(f"{name}.{unit}")
        data = {"parquet": _parquet, "arrows": _arrow_stream, "arrow": _arrow_file}[fmt](table)
        k.files.append(Entry(f"{name}.{unit}.{fmt}".encode(), data))
        k.file_outcomes += [Outcome(unit, i, reason, rid) for i, (reason, rid) in enumerate(outs)]
    if kafka:
        table, outs = build(f"{name}.k")
        k.messages = [(encode_arrow(table), ARROW_HEADERS)]
        k.kafka_outcomes = [Outcome(0, i, reason, rid) for i, (reason, rid) in enumerate(outs)]
    else:
        k.messages = None
    return k


def _rows_table(tag: str, m: int, seed: int, **cols: pa.Array) -> pa.Table:
    base: dict[str, pa.Array] = {"id": pa.array(_ids(tag, m)), "dissimilarities": _fixed(good_rows(m, seed))}
    base.update(cols)
    return pa.table({k: v for k, v in base.items() if v is not None})


# builders of the table kinds: a table for a tag, and the outcome of each of its rows


def all_rows(reason: str, m: int = 3, seed: int = 100, **cols: pa.Array) -> Builder:
    def build(tag: str) -> tuple[pa.Table, list[tuple[str, str | None]]]:
        t = _rows_table(tag, m, seed, **cols)
        ids = t.column("id").to_pylist() if "id" in t.schema.names and pa.types.is_string(
            t.schema.field("id").type) and t.schema.names.count("id") == 1 else [None] * m
        return t, [(reason, i) for i in ids]
    return build


def some_rows(m: int, bad: dict[int, str], make: Callable[[str, list[str]], pa.Table]) -> Builder:
    def build(tag: str) -> tuple[pa.Table, list[tuple[str, str | None]]]:
        ids = _ids(tag, m)
        return make(tag, ids), [(bad.get(i, EMBEDDED), ids[i]) for i in range(m)]
    return build


def patched(m: int, seed: int, patch: dict[int, tuple[int, float]], dtype: type = np.float64) -> Callable[
        [str, list[str]], pa.Table]:
    def make(tag: str, ids: list[str]) -> pa.Table:
        A = good_rows(m, seed).astype(dtype)
        for r, (c, v) in patch.items():
            A[r, c] = v
        return pa.table({"id": pa.array(ids), "dissimilarities": _fixed(A)})
    return make


def times(values: list[object], typ: pa.DataType) -> Callable[[str, list[str]], pa.Table]:
    def make(tag: str, ids: list[str]) -> pa.Table:
        return pa.table({"id": pa.array(ids), "dissimilarities": _fixed(good_rows(len(ids), 108)),
                         "event_time": pa.array(values, typ)})
    return make


def ordered(meta: bytes, field_level: bool = True) -> Builder:
    def build(tag: str) -> tuple[pa.Table, list[tuple[str, str | None]]]:
        t = _rows_table(tag, 3, 100)
        f = t.schema.field("dissimilarities")
        schema = (pa.schema([t.schema.field("id"), f.with_metadata({"streamembed.landmarks": meta})])
                  if field_level else t.schema.with_metadata({"streamembed.landmarks": meta}))
        return t.cast(schema), [("landmark_mismatch", i) for i in t.column("id").to_pylist()]
    return build


def table_kinds() -> list[Kind]:
    out: list[Kind] = []

    def add(name: str, about: str, build: Builder, **kw: object) -> None:
        out.append(_table_kind(name, about, build, **kw))  # type: ignore[arg-type]

    A3 = good_rows(3, 100)
    add("col_id_int64", "an integer id column", lambda tag: (
        pa.table({"id": pa.array([1, 2, 3]), "dissimilarities": _fixed(A3)}), [("bad_id", None)] * 3))
    add("col_id_binary", "a binary id column", lambda tag: (
        pa.table({"id": pa.array([b"a", b"b", b"c"]), "dissimilarities": _fixed(A3)}), [("bad_id", None)] * 3))
    add("col_id_struct", "an id column of structs", lambda tag: (
        pa.table({"id": pa.array([{"x": 1}] * 3), "dissimilarities": _fixed(A3)}), [("bad_id", None)] * 3))
    add("col_id_some_null", "two null ids and an empty one among five", some_rows(5, {1: "missing_id", 3: "missing_id",
                                                                                      4: "missing_id"},
        lambda tag, ids: pa.table({"id": pa.array([ids[0], None, ids[2], None, ""]),
                                   "dissimilarities": _fixed(good_rows(5, 101))})))
    add("col_id_absent", "no id column", lambda tag: (
        pa.table({"dissimilarities": _fixed(A3)}), [("missing_id", None)] * 3))
    add("col_id_duplicate", "issue item 1: two id columns", lambda tag: (
        pa.Table.from_arrays([pa.array(_ids(tag, 3)), pa.array(_ids(tag, 3)), _fixed(A3)],
                             names=["id", "id", "dissimilarities"]), [("undecodable", None)] * 3))
    add("col_vector_duplicate", "two dissimilarities columns", lambda tag: (
        pa.Table.from_arrays([pa.array(_ids(tag, 3)), _fixed(A3), _fixed(A3)],
                             names=["id", "dissimilarities", "dissimilarities"]), [("undecodable", None)] * 3))
    add("col_id_dictionary", "a dictionary-encoded id (valid)", some_rows(3, {}, lambda tag, ids: pa.table(
        {"id": pa.array(ids).dictionary_encode(), "dissimilarities": _fixed(A3)})))
    add("col_id_large_string", "a large_string id (valid)", some_rows(3, {}, lambda tag, ids: pa.table(
        {"id": pa.array(ids, pa.large_string()), "dissimilarities": _fixed(A3)})))
    add("col_vector_string", "dissimilarities as a string column", all_rows(
        "undecodable", dissimilarities=pa.array(["1,2,3"] * 3)))
    add("col_vector_list_of_strings", "a list of strings", all_rows(
        "non_numeric", dissimilarities=pa.array([["1"] * N_LANDMARKS] * 3, pa.list_(pa.string()))))
    add("col_vector_list_of_bools", "a list of booleans", all_rows(
        "non_numeric", dissimilarities=pa.array([[True] * N_LANDMARKS] * 3, pa.list_(pa.bool_()))))
    add("col_vector_struct", "a struct column", all_rows("undecodable", dissimilarities=pa.array([{"a": 1.0}] * 3)))
    add("col_vector_float16", "half floats (valid)", some_rows(3, {}, lambda tag, ids: pa.table(
        {"id": pa.array(ids), "dissimilarities": _fixed(A3.astype(np.float16), pa.float16())})))
    add("col_vector_int32", "integer dissimilarities (valid)", some_rows(3, {}, lambda tag, ids: pa.table(
        {"id": pa.array(ids), "dissimilarities": _fixed(np.rint(A3 * 10).astype(np.int32))})))
    add("col_vector_large_list", "a large_list column (valid)", some_rows(3, {}, lambda tag, ids: pa.table(
        {"id": pa.array(ids), "dissimilarities": pa.array(A3.tolist(), pa.large_list(pa.float64()))})))
    add("col_vector_null_elements", "a null element in one row", some_rows(3, {1: "non_finite"}, lambda tag, ids:
        pa.table({"id": pa.array(ids), "dissimilarities": _varlist(
            [A3[0].tolist(), [None] + A3[1, 1:].tolist(), A3[2].tolist()])})))
    add("col_vector_null_slot", "a null list in one row", some_rows(3, {1: "missing_vector"}, lambda tag, ids:
        pa.table({"id": pa.array(ids), "dissimilarities": _varlist([A3[0].tolist(), None, A3[2].tolist()])})))
    add("col_vector_misspelt", "a misspelt column name ('dissimilarity')", lambda tag: (
        pa.table({"id": pa.array(_ids(tag, 3)), "dissimilarity": _fixed(A3)}),
        [("missing_vector", i) for i in _ids(tag, 3)]))
    add("col_vector_absent", "neither dissimilarities nor features", lambda tag: (
        pa.table({"id": pa.array(_ids(tag, 3))}), [("missing_vector", i) for i in _ids(tag, 3)]))
    add("col_vector_all_null_type", "a dissimilarities column of type null", lambda tag: (
        pa.table({"id": pa.array(_ids(tag, 3)), "dissimilarities": pa.nulls(3)}),
        [("missing_vector", i) for i in _ids(tag, 3)]))
    add("col_vector_fixed_11", "fixed_size_list of 11 where 12 are expected", all_rows(
        "wrong_length", dissimilarities=_fixed(A3[:, :-1])))
    add("col_vector_empty_lists", "empty lists", all_rows("wrong_length", dissimilarities=_varlist([[]] * 3)))
    add("col_vector_mixed_lengths", "rows of 12, 5 and 13 values", some_rows(3, {1: "wrong_length", 2: "wrong_length"},
        lambda tag, ids: pa.table({"id": pa.array(ids), "dissimilarities": _varlist(
            [A3[0].tolist(), A3[1, :5].tolist(), A3[2].tolist() + [1.0]])})))

    add("col_vector_nan", "NaN in one row of four", some_rows(4, {2: "non_finite"}, patched(4, 102, {2: (3, np.nan)})))
    add("col_vector_inf", "+inf and -inf", some_rows(4, {0: "non_finite", 3: "non_finite"},
                                                     patched(4, 103, {0: (0, np.inf), 3: (5, -np.inf)})))
    add("col_vector_negative", "a negative dissimilarity", some_rows(4, {1: "negative"},
                                                                     patched(4, 104, {1: (2, -0.5)})))

    def huge(tag: str, ids: list[str]) -> pa.Table:
        A = good_rows(4, 105)
        A[1, :] = 1e100
        A[2, 0] = 1e300
        return pa.table({"id": pa.array(ids), "dissimilarities": _fixed(A)})
    add("col_vector_huge", "issue item 2: rows of 1e100 and 1e300 (finite)", some_rows(
        4, {1: "out_of_range", 2: "out_of_range"}, huge))

    def huge32(tag: str, ids: list[str]) -> pa.Table:
        A = good_rows(3, 106).astype(np.float32)
        A[1, :] = np.float32(1e30)
        return pa.table({"id": pa.array(ids), "dissimilarities": _fixed(A)})
    add("col_vector_huge_float32", "float32 rows of 1e30 (their squares overflow float32)", some_rows(
        3, {1: "out_of_range"}, huge32))
    add("col_vector_tiny", "subnormal values 1e-310 (valid, near every landmark's... nothing)", some_rows(
        3, {}, lambda tag, ids: pa.table({"id": pa.array(ids), "dissimilarities": _fixed(good_rows(3, 107) + 1e-310)})))

    forty = ["2024-05-01T12:00:00Z"] * 40
    forty[23] = "not a time"
    add("col_time_one_of_40", "issue item 10: one unparseable event_time string among 40 rows",
        some_rows(40, {23: "undecodable"}, times(forty, pa.string())))
    add("col_time_bool", "an event_time column of booleans", lambda tag: (
        _rows_table(tag, 3, 109, event_time=pa.array([True, False, True])),
        [("undecodable", i) for i in _ids(tag, 3)]))
    add("col_time_naive", "timestamps without a time zone (valid)", some_rows(
        3, {}, times([np.datetime64("2024-05-01T12:00:00", "us")] * 3, pa.timestamp("us"))))
    add("col_time_zoned_strings", "ISO strings with offsets and without (valid)", some_rows(
        3, {}, times(["2024-05-01T12:00:00+02:00", "2024-05-01T12:00:00", "2024-05-01T12:00:00.5Z"], pa.string())))
    add("col_version_string", "landmark_version as strings", all_rows(
        "unknown_landmark_version", landmark_version=pa.array(["1", "1", "1"])))
    add("col_version_float", "landmark_version as floats", all_rows(
        "unknown_landmark_version", landmark_version=pa.array([1.0, 1.0, 1.0])))
    add("col_version_mixed", "landmark_version 1, 7, null", some_rows(
        3, {1: "unknown_landmark_version"}, lambda tag, ids: pa.table(
            {"id": pa.array(ids), "dissimilarities": _fixed(A3), "landmark_version": pa.array([1, 7, None])})))

    names = [f"L{i}" for i in range(N_LANDMARKS)]
    add("col_landmarks_meta_unknown", "field metadata naming an order with an id the model does not have",
        ordered(json.dumps(names[:-1] + ["L99"]).encode()))
    add("col_landmarks_meta_not_json", "schema metadata streamembed.landmarks that is not JSON",
        ordered(b"[L0, L1", field_level=False))
    add("col_landmarks_list_of_floats", "a landmarks column of floats", all_rows(
        "landmark_mismatch", landmarks=pa.array([[0.5] * N_LANDMARKS] * 3)))
    add("col_features_on_dissimilarity_model", "features where the model takes dissimilarities", lambda tag: (
        pa.table({"id": pa.array(_ids(tag, 3)), "features": _fixed(objects(3, seed=110))}),
        [("undecodable", i) for i in _ids(tag, 3)]))
    add("col_extra_columns", "unknown extra columns (valid)", some_rows(3, {}, lambda tag, ids: pa.table(
        {"id": pa.array(ids), "dissimilarities": _fixed(A3), "colour": pa.array(["r", "g", "b"]),
         "weights": pa.array([[1, 2], None, []])})))
    add("col_empty_table", "a table of zero rows", lambda tag: (
        pa.table({"id": pa.array([], pa.string()), "dissimilarities": _fixed(np.zeros((0, N_LANDMARKS)))}), []))
    add("col_many_tiny_batches", "an Arrow stream of 30 one-row batches (valid)", some_rows(
        30, {7: "negative"}, patched(30, 111, {7: (1, -3.0)})), formats=("arrows",))

    # invalid UTF-8 inside Arrow string columns: only the rows that hold it (Parquet writers refuse it)
    def bad_utf8_ids(tag: str, ids: list[str]) -> pa.Table:
        raw = [x.encode() for x in ids]
        raw[1] = b"bad-\xff\xfe-id"
        return pa.table({"id": _bad_utf8_strings(raw), "dissimilarities": _fixed(good_rows(3, 112))})
    out.append(_table_kind("col_id_invalid_utf8", "invalid UTF-8 inside an Arrow string id",
                           lambda tag: (bad_utf8_ids(tag, _ids(tag, 3)), [(EMBEDDED, f"{tag}.0"), ("undecodable", None),
                                                                          (EMBEDDED, f"{tag}.2")]),
                           formats=("arrows", "arrow")))

    def bad_utf8_times(tag: str) -> tuple[pa.Table, list[tuple[str, str | None]]]:
        ids = _ids(tag, 3)
        raw = [b"2024-05-01T12:00:00Z", b"2024-\xff-01", b"2024-05-01T12:00:00Z"]
        t = pa.table({"id": pa.array(ids), "dissimilarities": _fixed(good_rows(3, 113)),
                      "event_time": _bad_utf8_strings(raw)})
        return t, [(EMBEDDED, ids[0]), ("undecodable", ids[1]), (EMBEDDED, ids[2])]
    out.append(_table_kind("col_time_invalid_utf8", "invalid UTF-8 inside an Arrow event_time string",
                           bad_utf8_times, formats=("arrows",)))
    return out


# ----------------------------------------------------------------------------- blocks (rows sharing `cross`)


def block_kinds() -> list[Kind]:
    out: list[Kind] = []
    L_ = landmark_points()

    def block(tag: str, k: int, seed: int) -> tuple[list[str], np.ndarray, np.ndarray]:
        Z = objects(k, seed=seed) + 1.0
        return _ids(tag, k), cdist(Z, L_), cdist(Z, Z)

    def add(name: str, about: str, k: int, edit: Callable[[list[str], np.ndarray, np.ndarray], pa.Table | None],
            reason: str, *, member: tuple[int, str] | None = None, json_too: bool = True,
            json_reason: str | None = None) -> None:
        """A block of k; every member dead with ``reason`` (``member``: that row has its own reason)."""
        def build(tag: str) -> tuple[pa.Table, list[tuple[str, str | None]]]:
            ids, A, C = block(tag, k, 200 + len(out))
            t = edit(ids, A, C)
            if t is None:
                t = pa.table({"id": pa.array(ids), "dissimilarities": _fixed(A), "cross": _fixed(C)})
            reasons = [reason] * k
            if member is not None:
                reasons[member[0]] = member[1]
            return t, [(r, i) for r, i in zip(reasons, ids, strict=True)]
        kind = _table_kind(name, about, build, formats=("parquet",))
        if json_too:  # the same block as one JSON message {"objects": [...], "cross": [[...]]}
            assert kind.messages is not None
            t, outs = build(f"{name}.j")
            rows = t.to_pylist()
            doc = {"objects": [{k_: v for k_, v in r.items() if k_ != "cross"} for r in rows],
                   "cross": [r["cross"] for r in rows]}
            kind.messages.append((json.dumps(doc, allow_nan=True).encode(), JSON_HEADERS))
            kind.kafka_outcomes += [Outcome(1, i, json_reason or r, rid) for i, (r, rid) in enumerate(outs)]
        out.append(kind)

    def cross_edit(f: Callable[[np.ndarray], None]) -> Callable[[list[str], np.ndarray, np.ndarray], pa.Table]:
        def edit(ids: list[str], A: np.ndarray, C: np.ndarray) -> pa.Table:
            C = C.copy()
            f(C)
            return pa.table({"id": pa.array(ids), "dissimilarities": _fixed(A), "cross": _fixed(C)})
        return edit

    def setitem(i: int, j: int, v: float) -> Callable[[np.ndarray], None]:
        def f(C: np.ndarray) -> None:
            C[i, j] = v
        return f

    def sym(i: int, j: int, v: float) -> Callable[[np.ndarray], None]:
        def f(C: np.ndarray) -> None:
            C[i, j] = C[j, i] = v
        return f

    add("block_valid", "a valid block of 4 (control)", 4, lambda ids, A, C: None, EMBEDDED)
    add("block_asymmetric", "cross not symmetric", 4, cross_edit(setitem(0, 1, 99.0)), "bad_block")
    add("block_diagonal", "a non-zero diagonal", 4, cross_edit(setitem(2, 2, 1.0)), "bad_block")
    add("block_negative", "a negative cross value", 4, cross_edit(sym(0, 3, -1.0)), "bad_block")
    add("block_nan", "NaN in cross", 4, cross_edit(sym(1, 2, np.nan)), "bad_block")
    add("block_inf", "inf in cross", 4, cross_edit(sym(1, 3, np.inf)), "bad_block")
    add("block_huge", "1e200 in cross", 4, cross_edit(sym(0, 2, 1e200)), "bad_block")
    add("block_rows_short", "cross rows of k-1 values (a 4 x 3 matrix)", 4, lambda ids, A, C: pa.table(
        {"id": pa.array(ids), "dissimilarities": _fixed(A), "cross": _fixed(C[:, :3])}), "bad_block")
    add("block_row_counts_mixed", "cross rows of 4, 3, 4 and 5 values", 4, lambda ids, A, C: pa.table(
        {"id": pa.array(ids), "dissimilarities": _fixed(A),
         "cross": _varlist([C[0].tolist(), C[1, :3].tolist(), C[2].tolist(), C[3].tolist() + [0.0]])}), "bad_block")
    add("block_null_row", "one member without its cross row", 4, lambda ids, A, C: pa.table(
        {"id": pa.array(ids), "dissimilarities": _fixed(A),
         "cross": _varlist([C[0].tolist(), C[1].tolist(), None, C[3].tolist()])}), "bad_block", json_too=False)
    add("block_member_short", "one member with 11 dissimilarities", 4, lambda ids, A, C: pa.table(
        {"id": pa.array(ids), "dissimilarities": _varlist([a.tolist() for a in A[:3]] + [A[3, :11].tolist()]),
         "cross": _fixed(C)}), "bad_block", member=(3, "wrong_length"))
    add("block_member_no_id", "one member without an id", 4, lambda ids, A, C: pa.table(
        {"id": pa.array(ids[:2] + [None] + ids[3:]), "dissimilarities": _fixed(A), "cross": _fixed(C)}),
        "bad_block", member=(2, "missing_id"), json_too=False)
    add("block_member_unknown_version", "one member naming landmark_version 7", 4, lambda ids, A, C: pa.table(
        {"id": pa.array(ids), "dissimilarities": _fixed(A), "cross": _fixed(C),
         "landmark_version": pa.array([1, 1, 7, 1])}), "bad_block",
        member=(2, "unknown_landmark_version"))
    add("block_strings", "cross of strings", 3, lambda ids, A, C: pa.table(
        {"id": pa.array(ids), "dissimilarities": _fixed(A), "cross": pa.array([["0"] * 3] * 3)}), "bad_block",
        json_reason="non_numeric")
    add("block_too_large", f"a block of {MAX_BLOCK_ROWS + 1} rows (source.max_block_rows = {MAX_BLOCK_ROWS})",
        MAX_BLOCK_ROWS + 1, lambda ids, A, C: None, "bad_block")
    # Kafka-only JSON block messages that are not k x k at all
    k = Kind("block_json_malformed", "JSON block messages: cross 3 x 2, cross not a list, objects not a list, "
             "objects that are not objects",
             messages=[], kafka_outcomes=[])
    assert k.messages is not None
    objs = [{"id": f"block_json_malformed.{i}", "dissimilarities": good_rows(1, 230 + i)[0].tolist()} for i in range(3)]
    k.messages.append((json.dumps({"objects": objs, "cross": [[0, 1], [1, 0], [2, 2]]}).encode(), JSON_HEADERS))
    k.messages.append((json.dumps({"objects": objs, "cross": "none"}).encode(), JSON_HEADERS))
    k.messages.append((json.dumps({"objects": 5, "cross": []}).encode(), JSON_HEADERS))
    k.messages.append((json.dumps({"objects": [1, "two", None], "cross": [[0, 1, 1], [1, 0, 1], [1, 1, 0]]}).encode(),
                       JSON_HEADERS))
    k.kafka_outcomes = [Outcome(0, i, "bad_block", f"block_json_malformed.{i}") for i in range(3)]
    k.kafka_outcomes += [Outcome(1, None, "bad_block"), Outcome(2, None, "undecodable"), Outcome(3, None, "bad_block")]
    out.append(k)
    return out


# ----------------------------------------------------------------------------- whole files


def file_kinds() -> list[Kind]:
    out: list[Kind] = []

    def add(name: str, about: str, entries: list[Entry], outcomes: list[Outcome]) -> None:
        out.append(Kind(name, about, files=entries, file_outcomes=outcomes))

    good = pa.table({"id": pa.array(_ids("file_truncated_arrow_stream.0", 20)),
                     "dissimilarities": _fixed(good_rows(20, 300))})
    add("file_empty_parquet", "an empty .parquet file", [Entry(b"file_empty_parquet.parquet")],
        [Outcome(0, None, "unreadable_file")])
    add("file_empty_arrow", "an empty .arrow file", [Entry(b"file_empty_arrow.arrow")],
        [Outcome(0, None, "unreadable_file")])
    add("file_empty_jsonl", "an empty .jsonl file (nothing to do)", [Entry(b"file_empty_jsonl.jsonl")], [])
    add("file_garbage_parquet", "text in a .parquet file", [Entry(b"file_garbage_parquet.parquet",
                                                                  b"this is not parquet at all")],
        [Outcome(0, None, "unreadable_file")])
    add("file_garbage_arrows", "random bytes in a .arrows file", [Entry(
        b"file_garbage_arrows.arrows", np.random.default_rng(5).bytes(3000))], [Outcome(0, None, "unreadable_file")])
    pq_bytes = _parquet(good)
    add("file_truncated_parquet", "the first half of a Parquet file (magic, no footer)", [Entry(
        b"file_truncated_parquet.parquet", pq_bytes[: len(pq_bytes) // 2])], [Outcome(0, None, "unreadable_file")])
    flipped = bytearray(pq_bytes)
    flipped[-12:-8] = b"\xff\xff\xff\x7f"  # footer length: far beyond the file
    add("file_parquet_bad_footer_length", "a Parquet footer length that points before the file", [Entry(
        b"file_parquet_bad_footer_length.parquet", bytes(flipped))], [Outcome(0, None, "unreadable_file")])
    add("file_parquet_as_arrow", "Parquet bytes named .arrow", [Entry(b"file_parquet_as_arrow.arrow", pq_bytes)],
        [Outcome(0, None, "unreadable_file")])
    add("file_json_as_parquet", "JSON lines named .parquet", [Entry(
        b"file_json_as_parquet.parquet", jsonl_line(_good_obj("x", 1)) + b"\n")], [Outcome(0, None, "unreadable_file")])
    stream = _arrow_stream(good, chunk=5)
    # cut inside the third message: the first two 5-row messages survive
    schema_len = len(_arrow_stream(good.slice(0, 0)))  # schema + end-of-stream marker (8 bytes)
    one_msg = (len(stream) - schema_len) // 4
    cut = schema_len - 8 + 2 * one_msg + one_msg // 2
    add("file_truncated_arrow_stream", "an Arrow stream cut inside its third message", [Entry(
        b"file_truncated_arrow_stream.0.arrows", stream[:cut])],
        [Outcome(0, i, EMBEDDED, f"file_truncated_arrow_stream.0.{i}") for i in range(10)]
        + [Outcome(0, 10, "undecodable")])
    goodf = pa.table({"id": pa.array(_ids("file_arrow_no_footer.0", 12)),
                      "dissimilarities": _fixed(good_rows(12, 301))})
    fbytes = _arrow_file(goodf, chunk=4)
    footer_len = int.from_bytes(fbytes[-10:-6], "little")
    add("file_arrow_no_footer", "an Arrow IPC file without its footer (all batches present)", [Entry(
        b"file_arrow_no_footer.0.arrow", fbytes[: len(fbytes) - 10 - footer_len])],
        [Outcome(0, i, EMBEDDED, f"file_arrow_no_footer.0.{i}") for i in range(12)])
    add("file_unknown_extension", "a .csv file", [Entry(b"file_unknown_extension.csv", b"id,d\n1,2\n")],
        [Outcome(0, None, "unreadable_file")])
    add("file_binary_junk_jsonl", "binary junk without newlines in a .jsonl file", [Entry(
        b"file_binary_junk_jsonl.jsonl", bytes(range(256)).replace(b"\n", b"") * 4 + b"\n")],
        [Outcome(0, 0, "undecodable")])
    name = "file_non_utf8_name"
    lines = [jsonl_line(_good_obj(f"{name}.0.0", 310)), b'{"id": 5.5}', jsonl_line(_good_obj(f"{name}.0.2", 311))]
    add(name, "issue item 1: a file name that is not UTF-8", [Entry(b"file_non_utf8_name-\xff\xfe.jsonl",
                                                                    b"\n".join(lines) + b"\n")],
        [Outcome(0, 0, EMBEDDED, f"{name}.0.0"), Outcome(0, 1, "bad_id"), Outcome(0, 2, EMBEDDED, f"{name}.0.2")])
    name = "file_unfinished_last_line"
    add(name, "a last line without newline that is not (yet) JSON: a dead letter after incomplete_seconds", [Entry(
        f"{name}.jsonl".encode(), jsonl_line(_good_obj(f"{name}.0.0", 312)) + b'\n{"id": "' + name.encode()
        + b'.0.1", "dissimilarities": [1.0, 2.')], [Outcome(0, 0, EMBEDDED, f"{name}.0.0"),
                                                     Outcome(0, 1, "undecodable")])
    name = "file_no_final_newline"
    add(name, "a complete last line without its newline (valid)", [Entry(
        f"{name}.jsonl".encode(), jsonl_line(_good_obj(f"{name}.0.0", 313)))],
        [Outcome(0, 0, EMBEDDED, f"{name}.0.0")])
    add("file_directory", "a directory named like an input file (ignored)", [Entry(b"file_directory.parquet",
                                                                                   kind="dir")], [])
    add("file_dangling_symlink", "a symbolic link to nowhere (ignored)", [Entry(b"file_dangling_symlink.jsonl",
                                                                                b"/nonexistent/x", kind="symlink")], [])
    add("file_fifo", "a named pipe with a .jsonl name (ignored: never opened, never blocks)", [Entry(
        b"file_fifo.jsonl", kind="fifo")], [])
    add("file_hidden_and_temp", "hidden and .tmp names (ignored by design)", [
        Entry(b".file_hidden_and_temp.jsonl", b"{junk\n"), Entry(b"file_hidden_and_temp.jsonl.tmp", b"{junk\n")], [])
    return out


# ----------------------------------------------------------------------------- Kafka-only messages


def message_kinds() -> list[Kind]:
    out: list[Kind] = []
    good = pa.table({"id": pa.array(["msg.x"]), "dissimilarities": _fixed(good_rows(1, 400))})
    value = encode_arrow(good)

    def add(name: str, about: str, messages: list[tuple[bytes | None, list[tuple[str, bytes]]]],
            outcomes: list[Outcome]) -> None:
        out.append(Kind(name, about, messages=messages, kafka_outcomes=outcomes))

    def rows_msg(tag: str, m: int, seed: int) -> bytes:
        return encode_arrow(pa.table({"id": pa.array(_ids(tag, m)), "dissimilarities": _fixed(good_rows(m, seed))}))

    add("msg_empty_value", "an empty value", [(b"", ARROW_HEADERS)], [Outcome(0, None, "undecodable")])
    add("msg_tombstone", "a null value (tombstone)", [(None, [])], [Outcome(0, None, "undecodable")])
    add("msg_unknown_content_type", "content-type text/csv", [(b"id,d\n", [("content-type", b"text/csv")])],
        [Outcome(0, None, "undecodable")])
    add("msg_binary_content_type", "a content-type header that is not text", [(value, [("content-type",
                                                                                        b"\xff\xfe\x00")])],
        [Outcome(0, None, "undecodable")])
    add("msg_schema_version_2", "streamembed-schema-version 2", [(value, ARROW_HEADERS + [(
        "streamembed-schema-version", b"2")])], [Outcome(0, None, "undecodable")])
    add("msg_schema_version_text", "streamembed-schema-version 'one'", [(value, ARROW_HEADERS + [(
        "streamembed-schema-version", b"one")])], [Outcome(0, None, "undecodable")])
    add("msg_landmark_header_text", "streamembed-landmark-version 'latest'", [(value, ARROW_HEADERS + [(
        "streamembed-landmark-version", b"latest")])], [Outcome(0, None, "unknown_landmark_version")])
    add("msg_landmark_header_unknown", "streamembed-landmark-version 99 on a two-row message", [(
        rows_msg("msg_landmark_header_unknown.0", 2, 401), ARROW_HEADERS + [("streamembed-landmark-version", b"99")])],
        [Outcome(0, 0, "unknown_landmark_version", "msg_landmark_header_unknown.0.0"),
         Outcome(0, 1, "unknown_landmark_version", "msg_landmark_header_unknown.0.1")])
    add("msg_landmark_header_overflow", "streamembed-landmark-version 10**23 (beyond 64 bits)", [(
        value, ARROW_HEADERS + [("streamembed-landmark-version", b"99999999999999999999999")])],
        [Outcome(0, None, "unknown_landmark_version")])
    add("msg_arrow_truncated", "an Arrow stream cut short", [(rows_msg("msg_arrow_truncated.0", 3, 402)[:-40],
                                                              ARROW_HEADERS)], [Outcome(0, None, "undecodable")])
    add("msg_arrow_garbage", "random bytes labelled Arrow", [(np.random.default_rng(9).bytes(500), ARROW_HEADERS)],
        [Outcome(0, None, "undecodable")])
    add("msg_arrow_marker_garbage", "the Arrow continuation marker, then garbage (sniffed)", [(
        b"\xff\xff\xff\xff" + b"\x00\x01" * 50, [])], [Outcome(0, None, "undecodable")])
    meta_t = good.replace_schema_metadata({"streamembed.schema_version": "9"})
    add("msg_arrow_schema_metadata_9", "schema metadata streamembed.schema_version = 9", [(encode_arrow(meta_t),
                                                                                           ARROW_HEADERS)],
        [Outcome(0, None, "undecodable")])
    add("msg_parquet_bytes", "a Parquet file as the value, no content-type", [(_parquet(good), [])],
        [Outcome(0, None, "undecodable")])
    add("msg_json_list_of_non_objects", "a JSON list of non-objects", [(b'[1, "a", null]', JSON_HEADERS)],
        [Outcome(0, 0, "undecodable"), Outcome(0, 1, "undecodable"), Outcome(0, 2, "undecodable")])
    add("msg_json_list_mixed", "a JSON list: a good object, a number, a bad object", [(json.dumps([
        _good_obj("msg_json_list_mixed.0.0", 403), 7, {"id": "msg_json_list_mixed.0.2", "dissimilarities": [1]}])
        .encode(), JSON_HEADERS)], [Outcome(0, 0, EMBEDDED, "msg_json_list_mixed.0.0"), Outcome(0, 1, "undecodable"),
                                    Outcome(0, 2, "wrong_length", "msg_json_list_mixed.0.2")])
    add("msg_json_empty_list", "an empty JSON list (nothing to do)", [(b"[]", JSON_HEADERS)], [])
    add("msg_json_sniffed", "a JSON object without content-type (sniffed)", [(
        jsonl_line(_good_obj("msg_json_sniffed.0.0", 404)), [])], [Outcome(0, 0, EMBEDDED, "msg_json_sniffed.0.0")])
    add("msg_json_deep_list", "issue item 1: a JSON message nested 5,000 levels", [(b"[" * DEEP + b"]" * DEEP,
                                                                                    JSON_HEADERS)],
        [Outcome(0, None, "undecodable")])
    add("msg_json_deep_in_list", "a list whose object is nested 900 levels deep (under the recursion limit)", [(
        b'[{"id": "msg_json_deep_in_list.0.0", "dissimilarities": ' + b"[" * 900 + b"]" * 900 + b"}]",
        JSON_HEADERS)], [Outcome(0, 0, "non_numeric", "msg_json_deep_in_list.0.0")])
    add("msg_json_not_utf8", "JSON content-type, bytes not UTF-8", [(b'{"id": "\xff"}', JSON_HEADERS)],
        [Outcome(0, None, "undecodable")])
    return out


def build_corpus() -> list[Kind]:
    """Every kind, JSON lines first, then tables, blocks, files and messages."""
    kinds = json_kinds() + table_kinds() + block_kinds() + file_kinds() + message_kinds()
    names = [k.name for k in kinds]
    assert len(set(names)) == len(names), "kind names must be unique"
    return kinds


# ----------------------------------------------------------------------------- laying it out


@dataclass
class Laid:
    """Where each unit went: file display name or Kafka offset -> (kind, unit); the good records after each kind."""

    where: dict[object, tuple[str, int]] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)  # kind -> id of the good record after it


def _display(name: bytes) -> str:
    return name.decode("utf-8", "replace")


def write_corpus(kinds: Iterable[Kind], directory: Path, *, mtime_base: float | None = None) -> Laid:
    """Write each kind's files, then a good ``<seq>-<kind>-after.jsonl``, in that modification-time order."""
    directory.mkdir(parents=True, exist_ok=True)
    laid = Laid()
    t = (time.time() - 3600) if mtime_base is None else mtime_base
    dfd = os.open(directory, os.O_RDONLY)
    try:
        for seq, k in enumerate(kinds):
            if k.files is None:
                continue
            for unit, e in enumerate(k.files):
                path = os.path.join(os.fsencode(directory), e.name)
                if e.kind == "dir":
                    os.mkdir(path)
                elif e.kind == "symlink":
                    os.symlink(e.data, path)
                elif e.kind == "fifo":
                    os.mkfifo(path)
                else:
                    with open(path, "wb") as f:
                        f.write(e.data)
                t += 0.01
                if e.kind != "symlink":
                    os.utime(path, (t, t))
                laid.where[_display(e.name)] = (k.name, unit)
            rid = f"{k.name}.after"
            after = os.path.join(os.fsencode(directory), f"{seq:03d}-{k.name}-after.jsonl".encode())
            with open(after, "wb") as f:
                f.write(jsonl_line(_good_obj(rid, 500 + seq)) + b"\n")
            t += 0.01
            os.utime(after, (t, t))
            laid.after[k.name] = rid
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return laid


def corpus_messages(kinds: Iterable[Kind]) -> list[tuple[str, int, bytes | None, list[tuple[str, bytes]]]]:
    """(kind, unit, value, headers) for every Kafka message, a good message (unit -1) after each kind."""
    out: list[tuple[str, int, bytes | None, list[tuple[str, bytes]]]] = []
    for seq, k in enumerate(kinds):
        if k.messages is None:
            continue
        for unit, (value, headers) in enumerate(k.messages):
            out.append((k.name, unit, value, headers))
        rid = f"{k.name}.after"
        out.append((k.name, -1, jsonl_line(_good_obj(rid, 500 + seq)), JSON_HEADERS))
    return out


def expected(kinds: Iterable[Kind], mode: str) -> tuple[set[str], set[tuple[str, int, int | None, str]]]:
    """(ids that must be embedded, dead letters as (kind, unit, row, reason)) in ``mode`` ("file" or "kafka")."""
    embedded: set[str] = set()
    dead: set[tuple[str, int, int | None, str]] = set()
    for k in kinds:
        if (k.files if mode == "file" else k.messages) is None:
            continue
        embedded.add(f"{k.name}.after")
        for o in k.outcomes(mode):
            if o.reason == EMBEDDED:
                assert o.id is not None
                embedded.add(o.id)
            else:
                dead.add((k.name, o.unit, o.row, o.reason))
    return embedded, dead


if __name__ == "__main__":
    ks = build_corpus()
    for mode in ("file", "kafka"):
        these = [k for k in ks if (k.files if mode == "file" else k.messages) is not None]
        emb, dd = expected(these, mode)
        print(f"{mode}: {len(these)} kinds, {len(emb)} records to embed, {len(dd)} dead letters")
    print(f"{len(ks)} kinds in all")
    for k in ks:
        modes = "+".join(m for m, v in (("file", k.files), ("kafka", k.messages)) if v is not None)
        print(f"  {k.name:40s} {modes:11s} {k.about}")


# ------------------------------------------------------------ in process (tests/stream/test_poison_in_process.py)


def outcomes_in_process(kind: Kind, mode: str, model: object,
                        workdir: Path) -> set[tuple[int, int | None, str, str | None]]:
    """A kind through the daemon's own components in this process: (unit, row, reason, id) of every record.

    File mode: ``DirectorySource`` (settle and incomplete times 0) and ``BatchEmbedder``; Kafka mode:
    ``kafka.codec.decode_message`` and ``BatchEmbedder``. Embedded rows have reason ``EMBEDDED`` and row None.
    """
    from streamembed.kafka.codec import decode_message
    from streamembed.stream.embedder import BatchEmbedder
    from streamembed.stream.origin import RowOrigin
    from streamembed.stream.sources import DirectorySource

    emb = BatchEmbedder(model, max_block_rows=MAX_BLOCK_ROWS)  # type: ignore[arg-type]
    got: set[tuple[int, int | None, str, str | None]] = set()

    def take(unit: int, table: pa.Table | None, dead: list, rows: np.ndarray | None, row_base: int) -> None:
        for d in dead:
            got.add((unit, d.row, d.reason, None))
        if table is not None and table.num_rows:
            pr = emb.process(table, origin=RowOrigin(None, rows, row_base))
            for d in pr.dead:
                got.add((unit, d.row, d.reason, None))
            if pr.output is not None:
                got.update((unit, None, EMBEDDED, i) for i in pr.output.column("id").to_pylist())

    if mode == "kafka":
        assert kind.messages is not None
        for unit, (value, headers) in enumerate(kind.messages):
            msg = decode_message(value, headers)
            take(unit, msg.table, msg.dead, msg.rows, 0)
        return got
    assert kind.files is not None
    laid = write_corpus([kind], workdir)
    src = DirectorySource(workdir, settle_seconds=0, incomplete_seconds=0, poll_seconds=0.01,
                          max_block_rows=MAX_BLOCK_ROWS, batch_rows=64)
    for _ in range(1000):
        b = src.poll()
        if b is None:
            if not src.backlog:
                break
            time.sleep(0.01)
            continue
        if b.origin.file is None or b.origin.file not in laid.where:
            continue  # the good record after the kind
        take(laid.where[b.origin.file][1], b.table, b.dead, b.origin.rows, b.origin.row_base)
    return got


def expected_in_process(kind: Kind, mode: str) -> set[tuple[int, int | None, str, str | None]]:
    return {(o.unit, None, EMBEDDED, o.id) if o.reason == EMBEDDED else (o.unit, o.row, o.reason, None)
            for o in kind.outcomes(mode)}
