"""Memory-mapped inputs: which files are mapped, the same chunks as a copied read, zero-copy vectors, changes seen."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from streamembed.stream.mapped import published_by_rename, should_map
from streamembed.stream.readers import FileChanged, iter_file, open_input

from ..helpers import input_table, write_arrow, write_jsonl, write_parquet

N = 6


def _table(m: int) -> pa.Table:
    A = np.arange(m * N, dtype=np.float32).reshape(m, N) / 7.0
    return input_table([f"r{i}" for i in range(m)], A, event_time=False)


def _write(tmp_path: Path, kind: str, m: int = 40) -> Path:
    t = _table(m)
    if kind == "parquet":
        return write_parquet(tmp_path / "x.parquet", t, row_group_size=9)
    if kind == "arrow-file":
        return write_arrow(tmp_path / "x.arrow", t, file_format=True, chunk=7)
    return write_arrow(tmp_path / "x.arrows", t, chunk=7)


def _age_mtime(path: Path) -> None:
    """Restore an older modification time (as ``cp -p`` or ``rsync`` do): the inode changed after the last write."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))


def test_modes_select_files(tmp_path: Path) -> None:
    arrows = _write(tmp_path, "arrow-stream")
    jsonl = write_jsonl(tmp_path / "x.jsonl", [{"id": "a", "dissimilarities": [1.0] * N}])
    empty = tmp_path / "e.parquet"
    empty.write_bytes(b"")
    st = arrows.stat()
    assert not should_map(arrows, st, "never") and should_map(arrows, st, "always")
    assert not should_map(jsonl, jsonl.stat(), "always") and not should_map(empty, empty.stat(), "always")
    # written in place, just now: copied; its modification time restored afterwards (inode changed since): mapped
    assert not published_by_rename(st) and not should_map(arrows, st, "auto")
    _age_mtime(arrows)
    assert published_by_rename(arrows.stat()) and should_map(arrows, arrows.stat(), "auto")
    with pytest.raises(ValueError, match="mmap mode"):
        should_map(arrows, st, "sometimes")


@pytest.mark.parametrize("kind", ["parquet", "arrow-stream", "arrow-file"])
def test_a_mapped_file_reads_as_the_copied_one_with_vectors_in_place(tmp_path: Path, kind: str) -> None:
    path = _write(tmp_path, kind)
    copied = list(iter_file(path, batch_rows=10))
    mapped = list(iter_file(path, batch_rows=10, mapping="always"))
    assert [(c.start_row, c.end_row) for c in mapped] == [(c.start_row, c.end_row) for c in copied]
    for a, b in zip(copied, mapped, strict=True):
        assert a.table.equals(b.table)
    resumed = list(iter_file(path, batch_rows=10, start_row=13, mapping="always"))
    assert resumed[0].start_row == 13 and resumed[0].table.column("id")[0].as_py() == "r13"
    opened = open_input(path, mapping="always")
    assert opened.mapped is not None
    if kind != "parquet":  # Arrow IPC: the vectors are views of the mapping, the ids copies
        lo = opened.mapped.data.ctypes.data
        hi = lo + opened.mapped.data.size
        chunk = next(iter(iter_file(path, batch_rows=10, opened=opened)))
        values = chunk.table.column("dissimilarities").chunk(0).values.buffers()[1]
        ids = chunk.table.column("id").chunk(0).buffers()[2]
        assert lo <= values.address < hi and not lo <= ids.address < hi
    opened.close()


def test_never_and_a_file_written_in_place_are_copied(tmp_path: Path) -> None:
    path = _write(tmp_path, "arrow-stream")
    assert open_input(path, mapping="never").mapped is None
    assert open_input(path, mapping="auto").mapped is None


def test_a_mapped_file_that_grows_while_read_is_a_changed_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "arrow-stream", m=40)
    chunks = iter_file(path, batch_rows=10, mapping="always")
    next(chunks)
    with open(path, "ab") as f:  # appended in place (never truncated: that would be SIGBUS, hence the modes)
        f.write(b"\0" * 64)
    with pytest.raises(FileChanged, match="memory-mapped"):
        list(chunks)


def test_a_mapped_file_replaced_by_rename_is_read_to_its_end_as_it_was(tmp_path: Path) -> None:
    path = _write(tmp_path, "arrow-stream", m=40)
    chunks = iter_file(path, batch_rows=10, mapping="always")
    first = next(chunks)
    newer = write_arrow(tmp_path / "new.arrows", _table(3))
    os.replace(newer, path)
    rest = list(chunks)
    assert first.start_row == 0 and rest[-1].end_row == 40


def test_a_published_file_truncated_later_is_copied_not_mapped(tmp_path: Path) -> None:
    """What makes ``auto`` safe to default to: a mapped file cut short under the daemon kills it (SIGBUS), and the
    restart must not map it again. A truncation is a write: it dates the inode's last change and its last write
    alike, so the file no longer looks published by rename and is copied (its short read is a dead letter)."""
    src = _write(tmp_path, "arrow-stream")
    published = tmp_path / "in.arrows"
    os.rename(src, published)
    _age_mtime(published)  # renamed into place (ctime after mtime) whatever the file system's clock granularity
    assert should_map(published, published.stat(), "auto")
    os.truncate(published, published.stat().st_size // 2)
    assert not published_by_rename(published.stat())
    assert not should_map(published, published.stat(), "auto") and should_map(published, published.stat(), "always")


def test_a_file_truncated_under_a_mapping_ends_a_one_shot_command_with_a_message(tmp_path: Path) -> None:
    """``embed --mmap auto`` maps files written in place too; the SIGBUS of one truncated under the mapping is
    turned into a message and exit 2 (``mapped.exit_on_truncation``), never a bare signal."""
    import subprocess
    import sys

    pytest.importorskip("streamembed.core._native")
    path = tmp_path / "in.arrows"
    path.write_bytes(b"\1" * (1 << 16))
    child = (
        "import os, sys\n"
        "from streamembed.stream.mapped import exit_on_truncation, map_file\n"
        "assert exit_on_truncation('the input was truncated\\n', 2)\n"
        "mf, _ = map_file(sys.argv[1])\n"
        "os.truncate(sys.argv[1], 0)\n"
        "print(int(mf.data[-1]))\n"
    )
    r = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr == "the input was truncated\n" and r.stdout == ""


def test_embed_maps_a_file_written_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``embed --mmap auto`` maps every input once the truncation handler is installed, else keeps auto's rule."""
    from streamembed.cli.embed import _mapping
    from streamembed.stream import mapped

    path = tmp_path / "x.arrows"
    path.write_bytes(_write(tmp_path, "arrow").read_bytes())  # written in place, in one write
    st = os.stat(path)
    installed: list[int] = []
    monkeypatch.setattr(mapped, "exit_on_truncation", lambda message, code: installed.append(code) or True)
    assert _mapping("never") == "never" and _mapping("always") == "always" and not installed
    assert _mapping("auto") == "always" and installed == [2]
    assert should_map(path, st, _mapping("auto"))
    monkeypatch.setattr(mapped, "exit_on_truncation", lambda message, code: False)  # no compiled extension
    assert _mapping("auto") == "auto"
