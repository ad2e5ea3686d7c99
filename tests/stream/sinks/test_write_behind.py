"""The Parquet sink's write-behind thread: the same file as writing inline, its errors, its bound.

Row groups are encoded and compressed on a thread of their own
(``stream.sinks.parquet._WriteBehind``) while the loop embeds the next batches; none of
that may show in the output or in what goes wrong.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamembed.stream.sinks import ParquetSink
from streamembed.stream.sinks.parquet import _dictionary_columns


def _tables(n: int = 10, rows: int = 70) -> list[pa.Table]:
    """Output-like tables: ids, float32 coordinates, a small flag column (deterministic values)."""
    rng = np.random.default_rng(7)
    return [pa.table({"id": pa.array([f"o{k * rows + i}" for i in range(rows)]),
                      "y0": pa.array(rng.standard_normal(rows).astype(np.float32)),
                      "y1": pa.array(rng.standard_normal(rows).astype(np.float32)),
                      "flag_bits": pa.array(rng.integers(0, 4, rows).astype(np.int32))})
            for k in range(n)]


def _inline(path: Path, tables: list[pa.Table], row_group_rows: int) -> None:
    """What the sink does, on the calling thread: buffer to a row group's worth, write it as one row group."""
    schema = tables[0].schema
    with pq.ParquetWriter(path, schema, compression="zstd", use_dictionary=_dictionary_columns(schema)) as w:
        buffered: list[pa.Table] = []
        for t in tables:
            buffered.append(t)
            if sum(b.num_rows for b in buffered) >= row_group_rows:
                table = pa.concat_tables(buffered)
                w.write_table(table, row_group_size=max(row_group_rows, table.num_rows))
                buffered = []
        if buffered:
            table = pa.concat_tables(buffered)
            w.write_table(table, row_group_size=max(row_group_rows, table.num_rows))


def test_the_write_behind_file_has_the_bytes_of_an_inline_writer(tmp_path: Path) -> None:
    tables = _tables()
    sink = ParquetSink(tmp_path, final_name="behind.parquet", row_group_rows=100)
    for t in tables:
        sink.write(t, "label")
    behind = sink.flush("label")
    _inline(tmp_path / "inline.parquet", tables, 100)
    assert behind is not None
    assert behind.read_bytes() == (tmp_path / "inline.parquet").read_bytes()
    assert pq.read_table(behind).equals(pa.concat_tables(tables))


def test_an_error_on_the_writer_thread_is_raised_as_itself_and_nothing_is_published(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where: list[str] = []

    def full_disk(self: pq.ParquetWriter, *args: object, **kwargs: object) -> None:
        where.append(threading.current_thread().name)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full_disk)
    sink = ParquetSink(tmp_path, final_name="out.parquet", row_group_rows=70)
    with pytest.raises(OSError) as caught:
        for t in _tables():
            sink.write(t, "l")
        sink.flush("l")
    assert caught.value.errno == 28
    assert where and where[0] == "streamembed-parquet-writer"  # it did happen on the writer thread
    sink.close()
    assert not (tmp_path / "out.parquet").exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # the temporary file is gone too


def test_the_write_behind_queue_holds_at_most_its_depth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    original = pq.ParquetWriter.write_table

    def stalled(self: pq.ParquetWriter, *args: object, **kwargs: object) -> None:
        gate.wait(20)
        original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", stalled)
    sink = ParquetSink(tmp_path, final_name="out.parquet", row_group_rows=70)  # every write is a row group
    tables = _tables()
    done: list[int] = []

    def produce() -> None:
        for i, t in enumerate(tables):
            sink.write(t, "l")
            done.append(i)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    seen, since = -1, time.monotonic()
    deadline = since + 10.0
    while time.monotonic() < deadline and (len(done) < 3 or time.monotonic() - since < 0.5):  # until it stops
        if len(done) != seen:
            seen, since = len(done), time.monotonic()
        time.sleep(0.01)
    try:
        # one table in the (stalled) writer, two queued (depth 2): the fourth write waits
        assert len(done) == 3 and producer.is_alive()
    finally:
        gate.set()
        producer.join(20)
    path = sink.flush("l")
    assert path is not None and pq.read_table(path).equals(pa.concat_tables(tables))
