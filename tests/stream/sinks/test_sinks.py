"""Sinks publish atomically under deterministic names; checkpoints round-trip and refuse garbage."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamembed.stream.checkpoint import Checkpoint, CheckpointError, CheckpointStore
from streamembed.stream.codecs import DeadRecord
from streamembed.stream.records import SCHEMA_VERSION_KEY, Reason
from streamembed.atomic import atomic_write_bytes
from streamembed.stream.sinks import DeadLetterSink, ParquetSink, safe_label

SCHEMA = pa.schema([("id", pa.string())], metadata={SCHEMA_VERSION_KEY: "1"})


def _batch(ids: list[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(ids)], schema=SCHEMA)


def test_nothing_is_visible_before_flush_and_everything_after(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path, row_group_rows=2)
    sink.write(_batch(["a", "b", "c"]), "files-x-r000")
    sink.write(_batch(["d"]), "ignored-after-open")
    assert list(tmp_path.glob("*.parquet")) == []  # only a hidden temp file so far
    assert sink.pending_rows == 4
    path = sink.flush("files-x-r000")
    assert path == tmp_path / "part-files-x-r000.parquet"
    assert pq.read_table(path).column("id").to_pylist() == ["a", "b", "c", "d"]
    assert pq.ParquetFile(path).metadata.metadata[SCHEMA_VERSION_KEY.encode()] == b"1"
    assert sink.pending_rows == 0 and sink.flush("again") is None
    assert [p.name for p in tmp_path.iterdir()] == ["part-files-x-r000.parquet"]


def test_a_published_file_is_whole_the_moment_its_name_appears(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # a reader listing the directory (another daemon, a dashboard) may open the file right after the
    # rename, before the writer closes its handle: the footer must already be on disk, and fsynced
    import streamembed.atomic as atomic

    seen: list[list[str]] = []
    synced: list[int] = []
    real_replace, real_fsync = atomic.os.replace, atomic.os.fsync

    def replace(src: str, dst: str) -> None:
        seen.append(pq.read_table(src).column("id").to_pylist())  # raises on a missing footer
        real_replace(src, dst)

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "replace", replace)
    monkeypatch.setattr(atomic.os, "fsync", fsync)
    sink = ParquetSink(tmp_path)
    sink.write(_batch(["a", "b"]), "files-x-r000")
    path = sink.flush("files-x-r000")
    assert path is not None and seen == [["a", "b"]]
    assert path.stat().st_size in synced  # the fsync covered every byte


def test_rewriting_the_same_label_replaces_the_file(tmp_path: Path) -> None:
    for ids in (["a", "b"], ["a", "b", "c"]):
        sink = ParquetSink(tmp_path)
        sink.write(_batch(ids), "L")
        sink.flush("L")
    assert pq.read_table(tmp_path / "part-L.parquet").num_rows == 3
    assert len(list(tmp_path.iterdir())) == 1


def test_stale_temp_files_from_a_crash_are_removed(tmp_path: Path) -> None:
    (tmp_path / ".part-L.parquet.tmp").write_bytes(b"half a file")
    ParquetSink(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_close_drops_unflushed_rows(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    sink.write(_batch(["a"]), "L")
    sink.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_dead_letter_sink_keeps_reason_and_raw_record(tmp_path: Path, fmt: str) -> None:
    sink = DeadLetterSink(tmp_path, fmt=fmt, source="files")
    sink.write([DeadRecord(Reason.UNDECODABLE, "not UTF-8", file="x.jsonl", row=2, raw=b"\xff"),
                DeadRecord(Reason.NEGATIVE, "negative: A[0] = -1", id="o1", record='{"id": "o1"}')],
               "files-x", model_version=1)
    path = sink.flush("files-x")
    assert path is not None and path.name == f"dead-files-x.{fmt}"
    if fmt == "parquet":
        rows = pq.read_table(path).to_pylist()
        assert rows[0]["raw"] == b"\xff"
    else:
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        assert rows[0]["raw"] == "/w=="  # base64 of 0xff
    assert [(r["id"], r["reason"], r["source"]) for r in rows] == [(None, "undecodable", "files"),
                                                                     ("o1", "negative", "files")]


def test_atomic_write_leaves_no_temp(tmp_path: Path) -> None:
    atomic_write_bytes(tmp_path / "f.json", b"{}")
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_safe_label() -> None:
    assert safe_label("dir/sub file.parquet") == "dir_sub_file.parquet"
    assert "/" not in safe_label("../../etc/passwd")


def test_checkpoint_round_trip_and_schema_version(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "ck.json")
    assert store.load() is None
    store.save(Checkpoint(sources={"files": {"done": ["a"], "current": None}},
                          model={"lineage": "abc", "version": 2, "landmarks": 12, "source": "m.npz"}))
    doc = json.loads((tmp_path / "ck.json").read_text())
    assert doc["schema_version"] == 2
    got = store.load()
    assert got.sources == {"files": {"done": ["a"], "current": None}} and got.model_version == 2
    assert got.lineage == "abc"


def test_a_schema_1_checkpoint_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "ck.json").write_text('{"schema_version": 1, "model_version": 3, "sources": {"files": {}}}')
    got = CheckpointStore(tmp_path / "ck.json").load()
    assert got.model_version == 3 and got.lineage is None and got.sources == {"files": {}}


@pytest.mark.parametrize("content, problem", [
    ("{not json", "unreadable"),
    ('{"schema_version": 99, "sources": {}}', "schema_version 99"),
    ("[]", "the document is a list"),
    ('{"schema_version": 2, "sources": []}', "'sources' must be an object"),
    ('{"schema_version": 2, "sources": {}, "model": {"lineage": 5, "version": "x"}}', "string lineage"),
    ('{"schema_version": 1, "model_version": "two", "sources": {}}', "'model_version' must be an integer"),
])
def test_unusable_checkpoint_refuses_naming_the_file_and_the_way_out(tmp_path: Path, content: str,
                                                                     problem: str) -> None:
    (tmp_path / "ck.json").write_text(content)
    with pytest.raises(CheckpointError, match=f"checkpoint {tmp_path / 'ck.json'}.*{problem}.*move it aside"):
        CheckpointStore(tmp_path / "ck.json").load()


def test_an_empty_roll_removes_a_stale_file_of_its_label(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    sink.write(_batch(["a"]), "L")
    sink.flush("L")  # published by a run that then crashed before its checkpoint
    assert ParquetSink(tmp_path).flush("L") is None  # the replay of L produced nothing for this sink
    assert list(tmp_path.iterdir()) == []
