"""Reading Parquet, Arrow IPC and JSON lines in fixed-size chunks, resumably, without raising."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from streamembed.stream.readers import iter_file
from streamembed.stream.records import Reason

from ..helpers import input_table, write_arrow, write_jsonl, write_parquet

N = 4


def _table(m: int) -> pa.Table:
    A = np.arange(m * N, dtype=np.float32).reshape(m, N)
    return input_table([f"r{i}" for i in range(m)], A, event_time=False)


def _ids(chunks) -> list[str]:
    return [i for c in chunks if c.table is not None for i in c.table.column("id").to_pylist()]


@pytest.mark.parametrize("kind", ["parquet", "arrow-stream", "arrow-file", "jsonl"])
def test_chunks_have_fixed_boundaries_and_resume_at_a_row(tmp_path: Path, kind: str) -> None:
    t = _table(23)
    if kind == "parquet":
        path = write_parquet(tmp_path / "x.parquet", t, row_group_size=7)
    elif kind == "arrow-stream":
        path = write_arrow(tmp_path / "x.arrows", t, chunk=5)
    elif kind == "arrow-file":
        path = write_arrow(tmp_path / "x.arrow", t, file_format=True, chunk=5)
    else:
        path = write_jsonl(tmp_path / "x.jsonl", t.to_pylist())
    chunks = list(iter_file(path, batch_rows=10))
    assert [(c.start_row, c.end_row) for c in chunks] == [(0, 10), (10, 20), (20, 23)]
    assert _ids(chunks) == [f"r{i}" for i in range(23)]
    resumed = list(iter_file(path, batch_rows=10, start_row=12))
    assert [(c.start_row, c.end_row) for c in resumed] == [(12, 22), (22, 23)]
    assert _ids(resumed) == [f"r{i}" for i in range(12, 23)]


@pytest.mark.parametrize("progressive", [False, True], ids=["snapshot", "progressive"])
def test_truncated_arrow_stream_yields_what_it_can_then_a_dead_record(tmp_path: Path, progressive: bool) -> None:
    path = write_arrow(tmp_path / "x.arrows", _table(20), chunk=5)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    chunks = list(iter_file(path, batch_rows=100, progressive=progressive))
    assert _ids(chunks) == [f"r{i}" for i in range(10)]
    assert chunks[-1].dead[0].reason == Reason.UNDECODABLE
    assert chunks[-1].dead[0].row == 10 and "truncated" in chunks[-1].dead[0].detail


@pytest.mark.parametrize("progressive", [False, True], ids=["snapshot", "progressive"])
def test_truncated_arrow_file_format_falls_back_to_its_stream(tmp_path: Path, progressive: bool) -> None:
    path = write_arrow(tmp_path / "x.arrow", _table(20), file_format=True, chunk=5)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    chunks = list(iter_file(path, batch_rows=100, progressive=progressive))
    assert chunks[-1].dead and chunks[-1].dead[0].reason == Reason.UNDECODABLE
    assert 0 < len(_ids(chunks)) < 20


@pytest.mark.parametrize("name,content", [("x.parquet", b"PAR1 garbage"), ("x.arrow", b""),
                                          ("x.arrows", b"\x00\x01\x02"), ("x.csv", b"a,b\n")])
@pytest.mark.parametrize("progressive", [False, True], ids=["snapshot", "progressive"])
def test_unreadable_files_become_one_dead_record(tmp_path: Path, name: str, content: bytes, progressive: bool) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    chunks = list(iter_file(path, batch_rows=10, progressive=progressive))
    assert len(chunks) == 1 and chunks[0].table is None
    assert chunks[0].dead[0].reason == Reason.UNREADABLE_FILE and chunks[0].dead[0].file == str(path)


def test_jsonl_bad_lines_are_dead_lettered_one_by_one(tmp_path: Path) -> None:
    good = {"id": "g1", "dissimilarities": [1.0, 2.0, 3.0, 4.0]}
    lines = [
        b'{"id": "g0", "dissimilarities": [1, 2, 3, 4]}',
        b"\xff\xfe not utf8",
        b"{not json",
        b'{"id": "n1", "dissimilarities": [1, "x", 3, 4]}',
        b'[1, 2]',
        b'{"id": 7.5, "dissimilarities": [1, 2, 3, 4]}',
        b"",
        b'{"id": "g2", "dissimilarities": [1, 2, 3, 4], "extra": true}',
    ]
    path = write_jsonl(tmp_path / "x.jsonl", [good], lines)
    chunks = list(iter_file(path, batch_rows=100))
    assert len(chunks) == 1
    c = chunks[0]
    assert c.table.column("id").to_pylist() == ["g1", "g0", "g2"]
    assert c.rows.tolist() == [0, 1, 8]
    reasons = [(d.row, d.reason) for d in c.dead]
    assert reasons == [(2, Reason.UNDECODABLE), (3, Reason.UNDECODABLE), (4, Reason.NON_NUMERIC),
                       (5, Reason.UNDECODABLE), (6, Reason.BAD_ID)]
    assert c.dead[0].raw.startswith(b"\xff\xfe")


def test_jsonl_block_file_is_one_chunk(tmp_path: Path) -> None:
    recs = [{"id": f"b{i}", "dissimilarities": [1.0] * N, "cross": [0.0 if i == j else 1.0 for j in range(3)]}
            for i in range(3)]
    path = write_jsonl(tmp_path / "b.jsonl", recs)
    chunks = list(iter_file(path, batch_rows=2))
    assert len(chunks) == 1 and chunks[0].table.num_rows == 3 and "cross" in chunks[0].table.schema.names


def test_parquet_block_file_is_one_chunk(tmp_path: Path) -> None:
    A = np.ones((5, N), np.float32)
    C = 1.0 - np.eye(5, dtype=np.float32)
    path = write_parquet(tmp_path / "b.parquet", input_table(list("abcde"), A, cross=C), row_group_size=2)
    chunks = list(iter_file(path, batch_rows=2))
    assert len(chunks) == 1 and chunks[0].table.num_rows == 5


def test_jsonl_integer_ids_are_their_decimal_text(tmp_path: Path) -> None:
    """A producer that numbers its objects sends {"id": 12345}; the id is "12345", not a bad_id.
    All-integer chunks take the vectorised path; mixed, huge and fractional ones the line-by-line path."""
    row = "[1, 2, 3, 4]"
    path = tmp_path / "ints.jsonl"
    path.write_text("".join(f'{{"id": {i}, "dissimilarities": {row}}}\n' for i in (7, -3, 0)))
    (chunk,) = iter_file(path, batch_rows=100)
    assert chunk.table.column("id").to_pylist() == ["7", "-3", "0"] and not chunk.dead
    assert chunk.table.schema.field("id").type == pa.string()
    lines = [f'{{"id": 12, "dissimilarities": {row}}}', f'{{"id": "s", "dissimilarities": {row}}}',
             f'{{"id": 123456789012345678901234567890, "dissimilarities": {row}}}',
             f'{{"id": 1.0, "dissimilarities": {row}}}', f'{{"id": false, "dissimilarities": {row}}}']
    path.write_text("".join(line + "\n" for line in lines))
    (chunk,) = iter_file(path, batch_rows=100)
    assert chunk.table.column("id").to_pylist() == ["12", "s", "123456789012345678901234567890"]
    assert [(d.row, d.reason) for d in chunk.dead] == [(3, Reason.BAD_ID), (4, Reason.BAD_ID)]
    assert "a string or an integer, got float 1.0" in chunk.dead[0].detail
