"""Environment errors name the file: a full disk's "[Errno 28] No space left on device" from
write/fsync or pyarrow's writer names no path; the daemon's message must say which file (which disk)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pyarrow as pa
import pytest

from streamembed.atomic import atomic_write_bytes, with_path
from streamembed.stream.sinks import ParquetSink


def _enospc(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_with_path_names_the_file_and_keeps_the_errno() -> None:
    exc = OSError(errno.ENOSPC, "No space left on device")
    named = with_path(exc, "/data/out/x.tmp")
    assert named.errno == errno.ENOSPC and named.filename == "/data/out/x.tmp" and named.__cause__ is exc
    assert str(named) == "[Errno 28] No space left on device: '/data/out/x.tmp'"
    already = FileNotFoundError(errno.ENOENT, "No such file or directory", "/a")
    assert with_path(already, "/b") is already


def test_a_failed_atomic_write_names_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(OSError) as info:
        atomic_write_bytes(tmp_path / "checkpoint.json", b"{}")
    assert info.value.errno == errno.ENOSPC and str(tmp_path) in str(info.value)


def test_a_failed_parquet_write_names_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sink = ParquetSink(tmp_path)
    sink.write(pa.table({"id": ["a"], "x": [1.0]}), "lab")
    monkeypatch.setattr(pa.parquet.ParquetWriter, "write_table", _enospc)
    with pytest.raises(OSError) as info:
        sink.flush("lab")
    assert info.value.errno == errno.ENOSPC and ".part-lab.parquet." in str(info.value), info.value
    assert str(tmp_path) in str(info.value)
