"""The fast paths give the same rows as the ordinary ones, and bad input on them is a dead letter.

Progressive reading (``streamembed embed``), the fast Parquet layout
(``fixed_size_binary`` rows), the write-behind Parquet sink and the Dask
backfill's task (run in process here; on a real cluster in
``tests/e2e/test_backfill_dask.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamembed.jobs.backfill import Task, expand_inputs, plan, run_task
from streamembed.model_io import model_to_bytes
from streamembed.stream.codecs import decode_batch
from streamembed.stream.packed import PACKED_DTYPE_KEY, packed_column
from streamembed.stream.readers import FileChanged, iter_file, open_input, progressive, slabs
from streamembed.stream.sinks import ParquetSink
from streamembed.stream.sources import FileSource
from streamembed.stream.output import y_matrix
from tests.stream.helpers import (
    N_LANDMARKS,
    dissimilarities,
    fitted_model,
    input_table,
    objects,
    write_arrow,
    write_jsonl,
    write_parquet,
)


def _rows(chunks: list) -> tuple[list[str], np.ndarray]:
    tables = [c.table for c in chunks if c.table is not None]
    t = pa.concat_tables(tables)
    return t.column("id").to_pylist(), decode_batch(t, n_landmarks=N_LANDMARKS).matrix


@pytest.mark.parametrize("file_format", [False, True], ids=["stream", "file"])
def test_progressive_arrow_reading_gives_the_rows_of_the_snapshot_reader(tmp_path: Path, monkeypatch,
                                                                        file_format: bool) -> None:
    # small slabs and fills, so that messages straddle slabs and are moved between them
    monkeypatch.setattr(progressive, "FILL_BYTES", 1000)
    monkeypatch.setattr(slabs, "SLAB_BYTES", 3000)
    monkeypatch.setattr(slabs, "_POOL", slabs.SlabPool(3000))
    A = dissimilarities(objects(500))
    ids = [f"x{i}" for i in range(500)]
    p = write_arrow(tmp_path / ("a.arrow" if file_format else "a.arrows"), input_table(ids, A), chunk=37,
                    file_format=file_format)
    snap = list(iter_file(p, batch_rows=64, start_row=10))
    prog = list(iter_file(p, batch_rows=64, start_row=10, progressive=True))
    assert [(c.start_row, c.end_row) for c in prog] == [(c.start_row, c.end_row) for c in snap]
    got_ids, got = _rows(prog)
    assert got_ids == ids[10:]
    np.testing.assert_array_equal(got, A[10:])
    assert not any(c.dead for c in prog)


def test_slabs_are_reused_once_no_batch_holds_them() -> None:
    pool = slabs.SlabPool(1024)
    view = pa.py_buffer(pool.get(100)).slice(10, 10)  # a batch decoded from the first slab
    first = id(pool._slabs[0])
    assert id(pool.get(100)) != first  # still held: a second slab
    del view
    assert id(pool.get(100)) == first and len(pool._slabs) == 2


@pytest.mark.parametrize("file_format", [False, True], ids=["stream", "file"])
def test_progressive_batches_are_zero_copy_views_of_the_pooled_slabs(tmp_path: Path, monkeypatch,
                                                                    file_format: bool) -> None:
    monkeypatch.setattr(progressive, "FILL_BYTES", 1000)
    monkeypatch.setattr(slabs, "_POOL", slabs.SlabPool(3000))
    table = input_table([f"x{i}" for i in range(300)], dissimilarities(objects(300)))
    p = write_arrow(tmp_path / ("z.arrow" if file_format else "z.arrows"), table, chunk=25, file_format=file_format)
    chunks = list(iter_file(p, batch_rows=50, progressive=True))
    pool = slabs.shared_pool()
    spans = [(s.ctypes.data, s.ctypes.data + s.size) for s in pool._slabs]
    for c in chunks:
        assert c.table is not None
        for chunk in c.table.column("dissimilarities").chunks:
            address = chunk.values.buffers()[1].address
            assert any(lo <= address < hi for lo, hi in spans)  # decoded in place, not copied
    assert sum(c.table.num_rows for c in chunks) == 300


def test_a_file_truncated_while_read_progressively_keeps_the_rows_before_and_dead_letters_the_rest(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(progressive, "FILL_BYTES", 512)
    A = dissimilarities(objects(400))
    p = write_arrow(tmp_path / "t.arrows", input_table([f"x{i}" for i in range(400)], A), chunk=50)
    size = p.stat().st_size
    src = FileSource([p], batch_rows=50)
    first = src.poll()
    assert first is not None and first.table is not None and first.table.num_rows == 50
    os.truncate(p, size // 2)  # shrinks under the reader: never SIGBUS, a short read
    batches = [first]
    while (b := src.poll()) is not None:
        batches.append(b)
    dead = [d for b in batches for d in b.dead]
    assert len(dead) == 1 and dead[0].reason == "unreadable_file"
    assert ("truncated while it was read" in dead[0].detail or "changed while it was read" in dead[0].detail)
    assert f"rows from {dead[0].row} on were not read" in dead[0].detail
    handed = sum(b.table.num_rows for b in batches if b.table is not None)
    assert 50 <= handed < 400 and dead[0].row == handed


def test_a_file_changed_while_read_progressively_raises_between_chunks(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(progressive, "FILL_BYTES", 512)
    A = dissimilarities(objects(200))
    p = write_arrow(tmp_path / "c.arrows", input_table([f"x{i}" for i in range(200)], A), chunk=20)
    chunks = iter_file(p, batch_rows=20, progressive=True)
    next(chunks)
    with open(p, "r+b") as fh:  # rewritten in place: same size, new modification time
        fh.write(b"\0")
        os.utime(p, ns=(1, 1))
    with pytest.raises(FileChanged):
        list(chunks)


def test_snapshot_reads_still_refuse_a_file_that_changes(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "a.jsonl", [{"id": "a", "dissimilarities": [1.0] * N_LANDMARKS}])
    opened = open_input(p)
    assert bytes(opened.snapshot) == p.read_bytes()


# ----------------------------------------------------------------------------- the fast Parquet layout


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fixed_size_binary_rows_decode_to_the_same_matrix_as_lists(tmp_path: Path, dtype) -> None:
    A = dissimilarities(objects(300), dtype=dtype)
    col, field = packed_column(A)
    schema = pa.schema([pa.field("id", pa.string()), field])
    ids = [f"x{i}" for i in range(300)]
    p = write_parquet(tmp_path / "fast.parquet", pa.Table.from_arrays([pa.array(ids), col], schema=schema),
                      row_group_size=128)
    got_ids, got = _rows(list(iter_file(p, batch_rows=100, progressive=True)))
    assert got_ids == ids and got.dtype == dtype
    np.testing.assert_array_equal(got, A)


def test_fast_layout_of_the_wrong_width_or_type_is_dead_lettered_row_by_row() -> None:
    A = dissimilarities(objects(4))
    col, field = packed_column(A[:, :-1])
    t = pa.Table.from_arrays([pa.array(list("abcd")), col], schema=pa.schema([pa.field("id", pa.string()), field]))
    dec = decode_batch(t, n_landmarks=N_LANDMARKS)
    assert dec.matrix.shape[0] == 0 and [d.reason for d in dec.dead] == ["wrong_length"] * 4
    assert dec.dead[0].detail == (f"'dissimilarities' is fixed_size_binary({4 * (N_LANDMARKS - 1)}): "
                                  f"{N_LANDMARKS - 1} float32 values per row, expected {N_LANDMARKS} "
                                  f"({4 * N_LANDMARKS} bytes)")
    odd = field.with_metadata({PACKED_DTYPE_KEY: b"int8"})
    dec = decode_batch(pa.Table.from_arrays([pa.array(list("abcd")), col], schema=pa.schema(
        [pa.field("id", pa.string()), odd])), n_landmarks=N_LANDMARKS)
    assert {d.reason for d in dec.dead} == {"non_numeric"}
    # a null row is missing its vector; the others are embedded
    full, field = packed_column(A)
    nulls = pa.FixedSizeBinaryArray.from_buffers(full.type, 4, [pa.py_buffer(np.packbits(
        [1, 0, 1, 1], bitorder="little")), full.buffers()[1]])
    dec = decode_batch(pa.Table.from_arrays([pa.array(list("abcd")), nulls], schema=pa.schema(
        [pa.field("id", pa.string()), field])), n_landmarks=N_LANDMARKS)
    assert [d.reason for d in dec.dead] == ["missing_vector"] and dec.dead[0].id == "b"
    np.testing.assert_array_equal(dec.matrix, A[[0, 2, 3]])


# ----------------------------------------------------------------------------- the write-behind sink


def test_write_behind_sink_writes_the_same_rows_and_row_groups(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path, final_name="out.parquet", row_group_rows=100)
    tables = [pa.table({"id": pa.array([f"x{i}" for i in range(k, k + 70)]), "v": pa.array(np.arange(70.0))})
              for k in range(0, 700, 70)]
    for t in tables:
        sink.write(t, "label")
    path = sink.flush("label")
    pf = pq.ParquetFile(path)
    assert pf.metadata.num_rows == 700
    assert [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)] == [140] * 5
    assert pf.read().column("id").to_pylist() == [f"x{i}" for i in range(700)]


def test_a_write_error_on_the_writer_thread_is_raised_by_flush(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path, final_name="out.parquet", row_group_rows=10)
    sink.write(pa.table({"v": pa.array(np.arange(20.0))}), "l")
    with pytest.raises(ValueError, match="another schema"):
        sink.write(pa.table({"v": pa.array(["not", "a", "float"] * 5)}), "l")
        sink.flush("l")
    sink.close()
    assert not list(tmp_path.glob(".*.tmp"))


# ----------------------------------------------------------------------------- backfill tasks (in process)


def test_backfill_plan_splits_parquet_into_row_group_ranges(tmp_path: Path) -> None:
    A = dissimilarities(objects(1000))
    ids = [f"x{i}" for i in range(1000)]
    write_parquet(tmp_path / "big.parquet", input_table(ids, A), row_group_size=100)
    a = write_arrow(tmp_path / "small.arrows", input_table(ids[:10], A[:10]))
    tasks = plan(expand_inputs([tmp_path]), rows_per_task=250)
    assert [(t.name, t.start_row, t.end_row) for t in tasks] == [
        ("big.parquet", 0, 300), ("big.parquet", 300, 600), ("big.parquet", 600, 900), ("big.parquet", 900, 1000),
        ("small.arrows", 0, None)]
    assert len({t.stem for t in tasks}) == 5
    assert expand_inputs([str(tmp_path / "*.arrows")]) == [a]
    with pytest.raises(FileNotFoundError):
        expand_inputs([tmp_path / "nothing-*.parquet"])


def test_a_task_rerun_rewrites_its_part_and_its_row_range_exactly(tmp_path: Path) -> None:
    est = fitted_model()
    model_bytes = model_to_bytes(est.model_)
    A = dissimilarities(objects(1000))
    A[5, 0] = np.nan  # one row the core refuses
    ids = [f"x{i}" for i in range(1000)]
    p = write_parquet(tmp_path / "in.parquet", input_table(ids, A), row_group_size=100)
    out = tmp_path / "out"
    (out / "dead-letter").mkdir(parents=True)
    tasks = plan([p], rows_per_task=500)
    first = [run_task(t, model_bytes, str(out), batch_rows=64) for t in tasks]
    again = [run_task(t, model_bytes, str(out), batch_rows=64) for t in tasks]
    assert [r.output for r in first] == [r.output for r in again]
    got = [i for f in sorted(out.glob("part-*.parquet")) for i in pq.read_table(f).column("id").to_pylist()]
    dead = [i for f in sorted((out / "dead-letter").glob("dead-*.parquet"))
            for i in pq.read_table(f).column("id").to_pylist()]
    assert sorted(got + dead) == sorted(ids) and dead == ["x5"]
    assert sum(r.embedded for r in again) == 999 and sum(r.dead for r in again) == 1
    ref = est.embed(np.delete(A, 5, axis=0)).y
    y = np.concatenate([y_matrix(pq.read_table(f))
                        for f in sorted(out.glob("part-*.parquet"))])
    np.testing.assert_array_equal(y, ref)
    assert not list(out.rglob("*.tmp"))


def test_an_unreadable_file_is_one_dead_letter_of_its_task(tmp_path: Path) -> None:
    bad = tmp_path / "bad.arrows"
    bad.write_bytes(b"this is not arrow")
    out = tmp_path / "out"
    r = run_task(Task(str(bad), bad.name), model_to_bytes(fitted_model().model_), str(out))
    assert r.unreadable and r.dead == 1 and r.output is None
    row = pq.read_table(r.dead_letters).to_pylist()[0]
    assert row["reason"] == "unreadable_file" and row["file"] == "bad.arrows"


def test_an_arrow_stream_with_dictionary_columns_is_read_progressively_with_the_same_rows(tmp_path: Path) -> None:
    A = dissimilarities(objects(50))
    t = input_table([f"x{i}" for i in range(50)], A)
    t = t.set_column(0, "id", t.column("id").dictionary_encode())
    p = write_arrow(tmp_path / "d.arrows", t, chunk=16)
    chunks = list(iter_file(p, batch_rows=20, progressive=True))
    assert [(c.start_row, c.end_row) for c in chunks] == [(0, 20), (20, 40), (40, 50)]
    got = decode_batch(pa.concat_tables([c.table for c in chunks]), n_landmarks=N_LANDMARKS)
    assert got.ids.to_pylist() == [f"x{i}" for i in range(50)]
    np.testing.assert_array_equal(got.matrix, A)
