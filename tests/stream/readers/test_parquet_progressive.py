"""Parquet read progressively (``streamembed embed``): row groups decoded as they are read (``readers.parquet_fill``).

The snapshot reader read a whole Parquet file into fresh memory before its
first row group was decoded (0.27-0.6 s for 600 MB, with nothing embedded
meanwhile); now the footer is read first, and the row groups on a thread of
their own into reused slabs, each waited for just before it is decoded. The rows are those of the snapshot
reader, and a file that changes while it is read keeps the rows handed out and
dead-letters the rest, as for Arrow IPC.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from streamembed.stream.codecs import decode_batch
from streamembed.stream.packed import packed_column
from streamembed.stream.readers import iter_file, open_input, parquet_fill, progressive
from streamembed.stream.sources import FileSource
from tests.stream.helpers import N_LANDMARKS, dissimilarities, input_table, objects, write_parquet


def _rows(chunks: list) -> tuple[list[str], np.ndarray]:
    t = pa.concat_tables([c.table for c in chunks if c.table is not None])
    return t.column("id").to_pylist(), decode_batch(t, n_landmarks=N_LANDMARKS).matrix


def _fsb_table(ids: list[str], A: np.ndarray) -> pa.Table:
    col, field = packed_column(A.astype(np.float32))
    return pa.Table.from_arrays([pa.array(ids), col], schema=pa.schema([pa.field("id", pa.string()), field]))


@pytest.mark.parametrize("layout", ["list", "fixed_size_binary"])
def test_progressive_parquet_gives_the_rows_of_the_snapshot_reader(tmp_path: Path, monkeypatch, layout: str) -> None:
    A = dissimilarities(objects(500))
    ids = [f"x{i}" for i in range(500)]
    table = input_table(ids, A) if layout == "list" else _fsb_table(ids, A)
    p = write_parquet(tmp_path / "a.parquet", table, row_group_size=70)
    for start in (0, 10, 140, 499):
        snap = list(iter_file(p, batch_rows=64, start_row=start))
        prog = list(iter_file(p, batch_rows=64, start_row=start, progressive=True))
        assert [(c.start_row, c.end_row) for c in prog] == [(c.start_row, c.end_row) for c in snap]
        got_ids, got = _rows(prog)
        assert got_ids == ids[start:]
        np.testing.assert_array_equal(got, A[start:].astype(got.dtype))
        assert not any(c.dead for c in prog)


class _Gate:
    """``read_into`` of the fill thread, held after ``allow`` reads until ``open`` is set (or 10 s)."""

    def __init__(self, allow: int) -> None:
        self.allow, self.reads = allow, 0
        self.open = threading.Event()
        self.real = parquet_fill.read_into

    def __call__(self, fh, buf):  # read_into's signature
        self.reads += 1
        if self.reads > self.allow:
            self.open.wait(10)
        return self.real(fh, buf)


def test_the_first_row_group_is_handed_out_before_the_file_is_read_whole(tmp_path: Path, monkeypatch) -> None:
    A = dissimilarities(objects(400))
    p = write_parquet(tmp_path / "f.parquet", _fsb_table([f"x{i}" for i in range(400)], A), row_group_size=100)
    gate = _Gate(allow=1)  # one row group
    monkeypatch.setattr(parquet_fill, "read_into", gate)
    src = open_input(p, progressive=True)
    assert src.open_parquet is not None and src.snapshot is None  # not read whole when opened
    chunks = iter_file(p, batch_rows=100, opened=src)
    first = next(chunks)  # the reader thread is held after its first read: this row group came without the rest
    assert first.table is not None and first.table.num_rows == 100
    assert gate.reads <= 2 and not gate.open.is_set()  # the second row group's read is held
    gate.open.set()
    rest = list(chunks)
    assert sum(c.table.num_rows for c in rest if c.table is not None) == 300


def test_a_parquet_file_truncated_while_read_keeps_the_rows_before_and_dead_letters_the_rest(
        tmp_path: Path, monkeypatch) -> None:
    A = dissimilarities(objects(400))
    p = write_parquet(tmp_path / "t.parquet", _fsb_table([f"x{i}" for i in range(400)], A), row_group_size=50)
    gate = _Gate(allow=2)  # two row groups
    monkeypatch.setattr(parquet_fill, "read_into", gate)
    src = FileSource([p], batch_rows=50)
    first = src.poll()
    assert first is not None and first.table is not None and first.table.num_rows == 50
    os.truncate(p, p.stat().st_size // 2)  # shrinks under the reader (no mapping: never SIGBUS, a short read)
    gate.open.set()
    batches = [first]
    while (b := src.poll()) is not None:
        batches.append(b)
    dead = [d for b in batches for d in b.dead]
    assert len(dead) == 1 and dead[0].reason == "unreadable_file"
    assert "truncated while it was read" in dead[0].detail or "changed while it was read" in dead[0].detail
    handed = sum(b.table.num_rows for b in batches if b.table is not None)
    assert 50 <= handed < 400 and dead[0].row == handed


def test_row_groups_are_read_into_reused_slabs(tmp_path: Path, monkeypatch) -> None:
    """At most a few row groups' bytes are held at once, in slabs of the pool (not one buffer of the file's size)."""
    from streamembed.stream.readers import slabs

    monkeypatch.setattr(slabs, "_POOL", slabs.SlabPool(1024))
    A = dissimilarities(objects(1000))
    p = write_parquet(tmp_path / "r.parquet", _fsb_table([f"x{i}" for i in range(1000)], A), row_group_size=50)
    got = sum(c.table.num_rows for c in iter_file(p, batch_rows=50, progressive=True) if c.table is not None)
    pool = slabs.shared_pool()
    assert got == 1000 and len(pool._slabs) <= 6
    assert max(s.size for s in pool._slabs) < p.stat().st_size // 4


def test_a_parquet_file_rewritten_in_place_after_it_was_read_is_caught_at_its_end(tmp_path: Path) -> None:
    A = dissimilarities(objects(120))
    p = write_parquet(tmp_path / "c.parquet", _fsb_table([f"x{i}" for i in range(120)], A), row_group_size=40)
    chunks = iter_file(p, batch_rows=40, progressive=True)
    next(chunks)
    os.utime(p, ns=(1, 1))  # another version: same bytes, another modification time
    with pytest.raises(progressive.FileChanged):
        list(chunks)
