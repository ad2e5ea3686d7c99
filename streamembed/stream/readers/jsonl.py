"""JSON lines: one vectorised pyarrow parse per chunk, line by line only when a chunk holds a bad line.

:func:`parse_json_lines` is the same parser for JSON Kafka messages.
"""

from __future__ import annotations

import collections
import itertools
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson

from streamembed.stream.codecs import DeadRecord, writable_text
from streamembed.stream.readers.base import VECTOR_FIELDS, ReadChunk, truncated, unreadable
from streamembed.stream.readers.opening import Input
from streamembed.stream.records import (
    INPUT_CROSS,
    INPUT_DISSIMILARITIES,
    INPUT_EVENT_TIME,
    INPUT_FEATURES,
    INPUT_ID,
    INPUT_LANDMARK_VERSION,
    INPUT_LANDMARKS,
    INPUT_OBJECT,
    Reason,
)

#: JSON-lines parse schema for the known fields (other keys are kept as inferred columns, so a
#: misspelt key can be named in the dead letter). event_time stays a string here; decoding parses it.
_JSON_SCHEMA = pa.schema(
    [
        pa.field(INPUT_ID, pa.string()),
        pa.field(INPUT_DISSIMILARITIES, pa.list_(pa.float64())),
        pa.field(INPUT_FEATURES, pa.list_(pa.float64())),
        pa.field(INPUT_LANDMARK_VERSION, pa.int64()),
        pa.field(INPUT_EVENT_TIME, pa.string()),
        pa.field(INPUT_CROSS, pa.list_(pa.float64())),
    ]
)


#: The same with integer ids (``{"id": 12345}``): read as int64, then kept as their decimal text.
_JSON_SCHEMA_INT_IDS = _JSON_SCHEMA.set(_JSON_SCHEMA.get_field_index(INPUT_ID), pa.field(INPUT_ID, pa.int64()))


def _drop_unused(table: pa.Table) -> pa.Table:
    """Drop all-null optional columns (keys no line used), keep ``id``."""
    drop = [c for c in table.schema.names if c != INPUT_ID and table.column(c).null_count == table.num_rows]
    return table.drop_columns(drop) if drop else table


def iter_jsonl(src: Input, batch_rows: int, start_row: int, max_block_rows: int, name: str,
               final: bool) -> Iterator[ReadChunk]:
    """Chunks of an opened JSON-lines file (``iter_file``'s arguments); an unfinished last line is a ``tail``."""
    try:
        f = src.binary()
    except OSError as exc:
        yield unreadable(name, start_row, f"cannot open: {exc}")
        return
    with f:
        first = f.readline()
        f.seek(0)
        rows = max_block_rows + 1 if b'"cross"' in first and b'"block"' not in first else batch_rows
        collections.deque(itertools.islice(f, start_row), maxlen=0)  # skip, C-level
        pos = start_row
        while True:
            try:
                lines = list(itertools.islice(f, rows))
            except OSError as exc:
                yield truncated(name, pos, f"read error: {exc}", final)
                return
            if not lines:
                return
            tail = None
            if not lines[-1].endswith(b"\n") and not _parses(lines[-1]) and not final:
                # an unfinished last line: leave it for when the file is complete
                lines.pop()
                tail = f"line {pos + len(lines)} is unfinished (no newline, not yet valid JSON)"
            if lines:
                chunk = _parse_lines(lines, pos, name)
                if tail is not None:
                    chunk.tail = tail
                yield chunk
                pos += len(lines)
            elif tail is not None:
                yield ReadChunk(None, pos, pos, tail=tail)
            if tail is not None:
                return


def _parses(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


def _parse_lines(lines: list[bytes], start: int, name: str) -> ReadChunk:
    """Fast path: one vectorised pyarrow JSON parse of the whole chunk."""
    end = start + len(lines)
    if min(map(len, lines)) > 2:  # no blank lines (pyarrow would skip them, shifting rows)
        data = pa.py_buffer(b"".join(lines))
        # string ids; else (a producer that numbers its objects) integer ids, as their decimal text
        for schema in (_JSON_SCHEMA, _JSON_SCHEMA_INT_IDS):
            try:
                table = pajson.read_json(
                    data,
                    read_options=pajson.ReadOptions(use_threads=False, block_size=len(data) + 1),
                    parse_options=pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer"),
                )
            except (pa.ArrowException, ValueError, RecursionError):
                continue
            if table.num_rows != len(lines):
                break
            if schema is _JSON_SCHEMA_INT_IDS:
                i = table.schema.get_field_index(INPUT_ID)
                table = table.set_column(i, INPUT_ID, table.column(i).cast(pa.string()))
            return ReadChunk(_drop_unused(table), start, end)
    return _parse_lines_slowly(lines, start, name)


def parse_json_lines(lines: list[bytes], start: int = 0, name: str = "") -> ReadChunk:
    """Parse JSON lines (one object per line, no newline inside) into rows and dead letters.

    The same parser and checks as JSON-lines files (used for JSON Kafka
    messages); line j is row ``start + j`` of ``name``.
    """
    return _parse_lines(lines, start, name)


def _parse_lines_slowly(lines: list[bytes], start: int, name: str) -> ReadChunk:
    """The bad path: line by line, so each bad line gets its own dead letter."""
    dead: list[DeadRecord] = []
    good: list[dict[str, Any]] = []
    good_rows: list[int] = []
    good_text: list[str] = []
    for j, line in enumerate(lines):
        row = start + j
        stripped = line.strip()
        if not stripped:
            continue
        try:
            text = stripped.decode("utf-8").removeprefix("\ufeff")  # a byte-order mark, as the fast path skips it
        except UnicodeDecodeError as exc:
            dead.append(DeadRecord(Reason.UNDECODABLE, f"not UTF-8: {exc}", file=name, row=row, raw=line))
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:
            what = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            dead.append(DeadRecord(Reason.UNDECODABLE, f"not JSON: {what}", file=name, row=row, raw=line))
            continue
        if not isinstance(obj, dict):
            dead.append(DeadRecord(Reason.UNDECODABLE, "a JSON line must be an object", file=name, row=row,
                                   record=text))
            continue
        rid = obj.get(INPUT_ID)
        if isinstance(rid, int) and not isinstance(rid, bool):
            rid = obj[INPUT_ID] = str(rid)  # an integer id is its decimal text
        if rid is not None and not isinstance(rid, str):
            dead.append(DeadRecord(Reason.BAD_ID, f"id must be a string or an integer, got {type(rid).__name__} "
                                   f"{rid!r:.40}", file=name, row=row, record=text))
            continue
        problem = _object_problem(obj)
        if problem is not None:
            reason, detail = problem
            dead.append(DeadRecord(reason, detail, id=rid if isinstance(rid, str) else None, file=name, row=row,
                                   record=text))
            continue
        good.append(obj)
        good_rows.append(row)
        good_text.append(text)
    table: pa.Table | None = None
    if good:
        table, bad = _rows_to_table(good)
        for j, err in bad:
            obj = good[j]
            vector = any(not _all_numbers(obj.get(k)) for k in VECTOR_FIELDS)
            reason = Reason.NON_NUMERIC if vector else Reason.UNDECODABLE
            dead.append(DeadRecord(reason, f"cannot convert: {err}", id=obj.get(INPUT_ID), file=name,
                                   row=good_rows[j], record=good_text[j]))
        if bad:
            keep = sorted(set(range(len(good))) - {j for j, _ in bad})
            good_rows = [good_rows[j] for j in keep]
    if table is not None:
        table = _drop_unused(table)
    dead.sort(key=lambda r: r.row or 0)
    return ReadChunk(table, start, start + len(lines), dead, np.asarray(good_rows, dtype=np.int64))


def _rows_to_table(good: list[dict[str, Any]]) -> tuple[pa.Table | None, list[tuple[int, Exception]]]:
    """Decoded JSON objects -> (table of the convertible ones, [(index, error)] of the others).

    Keys outside the known fields become columns too, as the fast path keeps
    them (inferred): ``block`` keys, and misspelt keys that decoding names.
    """
    odd = _odd_objects(good)
    if odd:  # an 'object' of another JSON type than the chunk's first: refused, not turned into its JSON text
        rest = [j for j in range(len(good)) if j not in odd]
        table_rest, bad_rest = _rows_to_table([good[j] for j in rest])
        return table_rest, sorted([(rest[j], e) for j, e in bad_rest] + [(j, why) for j, why in odd.items()],
                                  key=lambda x: x[0])
    known = [{k: obj[k] for k in _JSON_SCHEMA.names if k in obj} for obj in good]
    bad: list[tuple[int, Exception]] = []
    try:
        table = pa.Table.from_pylist(known, schema=_JSON_SCHEMA)
        kept = list(range(len(good)))
    except (pa.ArrowException, TypeError, ValueError, OverflowError, RecursionError):
        kept = []
        for j, obj in enumerate(known):
            try:
                pa.Table.from_pylist([obj], schema=_JSON_SCHEMA)
                kept.append(j)
            except (pa.ArrowException, TypeError, ValueError, OverflowError, RecursionError) as exc:
                bad.append((j, exc))
        if not kept:
            return None, bad
        table = pa.Table.from_pylist([known[j] for j in kept], schema=_JSON_SCHEMA)
    extra = list(dict.fromkeys(k for j in kept for k in good[j] if k not in _JSON_SCHEMA.names))
    for key in extra:
        values = [good[j].get(key) for j in kept]
        if key == INPUT_LANDMARKS:  # ids (checked by _object_problem): integers as their decimal text
            table = table.append_column(key, pa.array([None if v is None else [str(x) for x in v] for v in values],
                                                      pa.list_(pa.string())))
            continue
        try:
            col = pa.array(values)
        except (pa.ArrowException, TypeError, ValueError, OverflowError, RecursionError):
            col = pa.array([None if v is None else _as_text(v) for v in values], pa.string())
        table = table.append_column(key, col)
    return table, bad


def _odd_objects(good: list[dict[str, Any]]) -> dict[int, Exception]:
    """The rows whose ``object`` is of another JSON type (text, list, ...) than the first row's that has one."""
    kinds = [None if o.get(INPUT_OBJECT) is None else type(o[INPUT_OBJECT]).__name__ for o in good]
    first = next((k for k in kinds if k is not None), None)
    return {j: ValueError(f"'{INPUT_OBJECT}' is a JSON {k} where the first object of these lines is a JSON {first}")
            for j, k in enumerate(kinds) if k is not None and k != first}


def _object_problem(obj: dict[str, Any]) -> tuple[str, str] | None:
    """What Arrow's conversion would silently change in a decoded JSON object: (reason, detail), or None.

    ``pa.Table.from_pylist`` turns true/false in a number list into 1.0/0.0 and truncates 1.5 into an
    int64; a lone surrogate ("\ud800", valid JSON) is not text.
    """
    for key in VECTOR_FIELDS:
        if not _all_numbers(obj.get(key)):
            return Reason.NON_NUMERIC, f"'{key}' must be a list of numbers, got {_as_text(obj.get(key))[:80]}"
    order = obj.get(INPUT_LANDMARKS)
    if order is not None and not (isinstance(order, list) and all(
            isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool)) for x in order)):
        return Reason.LANDMARK_MISMATCH, (f"'{INPUT_LANDMARKS}' must be a list of landmark ids (strings or "
                                          f"integers), got {_as_text(order)[:80]}")
    version = obj.get(INPUT_LANDMARK_VERSION)
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        return Reason.UNDECODABLE, f"landmark_version must be an integer, got {version!r:.40}"
    for key in (INPUT_ID, INPUT_EVENT_TIME):
        value = obj.get(key)
        if isinstance(value, str) and writable_text(value) != value:
            return Reason.UNDECODABLE, f"'{key}' is not valid Unicode text (a lone surrogate escape)"
    return None


def _as_text(v: Any) -> str:
    try:
        return json.dumps(v)
    except (ValueError, TypeError, RecursionError):
        return "<unprintable>"


def _all_numbers(v: Any) -> bool:
    if v is None:
        return True
    if not isinstance(v, list):
        return False
    return all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x in v)
