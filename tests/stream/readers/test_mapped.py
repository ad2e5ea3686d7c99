"""Memory-mapped inputs: which files are mapped, the same chunks as a copied read, zero-copy vectors, changes seen."""

from __future__ import annotations

import os
import subprocess
import sys
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


def _child_on_a_file(tmp_path: Path, size: int, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (``os`` and ``sys`` imported) in a fresh interpreter with ``sys.argv[1]`` a file of ``size``
    bytes: a SIGBUS there cannot take the test run with it."""
    path = tmp_path / "in.arrows"
    path.write_bytes(b"\1" * size)
    return subprocess.run([sys.executable, "-c", "import os, sys\n" + code, str(path)], capture_output=True,
                          text=True, timeout=60)


def test_a_file_truncated_under_a_mapping_ends_a_one_shot_command_with_a_message(tmp_path: Path) -> None:
    """``embed --mmap auto`` maps files written in place too; the SIGBUS of one truncated under the mapping is
    turned into a message and exit 2 (``mapped.exit_on_truncation``), never a bare signal."""
    pytest.importorskip("streamembed.core._native")
    r = _child_on_a_file(tmp_path, 1 << 16, (
        "from streamembed.stream.mapped import exit_on_truncation, map_file\n"
        "assert exit_on_truncation('the input was truncated\\n', 2)\n"
        "mf, _ = map_file(sys.argv[1])\n"
        "os.truncate(sys.argv[1], 0)\n"
        "print(int(mf.data[-1]))\n"
    ))
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


def _mapped_rss(address: int) -> int:
    """Bytes of the mapping that holds ``address`` that are mapped into this process (its ``Rss`` in smaps)."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and len(head) >= 5:  # a mapping's first line: lo-hi perms offset dev inode [path]
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            inside = lo <= address < hi
        elif inside and head[0] == "Rss:":
            return int(head[1]) * 1024
    raise AssertionError(f"no mapping holds {address:#x}")


def _fresh_mapping(path: Path, size: int) -> np.ndarray:
    import mmap

    path.write_bytes(np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8).tobytes())
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), size, prot=mmap.PROT_READ)
    return np.frombuffer(mm, dtype=np.uint8)


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps (Linux)")
def test_prefault_maps_the_pages_of_a_mapping_in_up_to_its_limit(tmp_path: Path) -> None:
    """The pages of a mapped input are mapped in on a thread of their own (none faults on the loop's thread), and
    only up to the limit (the readers' budget: a file larger than memory is not read ahead whole)."""
    from streamembed.stream.mapped import PREFAULT_CHUNK, prefault

    size, limit = 3 * PREFAULT_CHUNK // 2, PREFAULT_CHUNK // 2
    untouched = _fresh_mapping(tmp_path / "a.bin", size)
    assert _mapped_rss(untouched.ctypes.data) < limit // 4  # a new mapping holds (almost) no page yet
    data = _fresh_mapping(tmp_path / "b.bin", size)
    release = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    if release < (5, 14):
        pytest.skip("MADV_POPULATE_READ came with Linux 5.14")
    thread = prefault(data, limit)
    assert thread is not None
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert limit <= _mapped_rss(data.ctypes.data) < size
    whole = prefault(data, size)
    assert whole is not None
    whole.join(timeout=60)
    assert _mapped_rss(data.ctypes.data) >= size
    assert prefault(data, 0) is None


def test_prefault_of_a_file_truncated_under_its_mapping_stops_without_a_signal(tmp_path: Path) -> None:
    """A page a truncation removed is not read (reading it would raise SIGBUS): the thread just ends."""
    r = _child_on_a_file(tmp_path, 4 << 20, (
        "import numpy as np, mmap\n"
        "from streamembed.stream.mapped import prefault\n"
        "fh = open(sys.argv[1], 'rb')\n"
        "data = np.frombuffer(mmap.mmap(fh.fileno(), 4 << 20, prot=mmap.PROT_READ), dtype=np.uint8)\n"
        "os.truncate(sys.argv[1], 0)\n"
        "t = prefault(data, 4 << 20)\n"
        "t is None or t.join(60)\n"
        "print('alive')\n"
    ))
    assert r.returncode == 0 and r.stdout == "alive\n", r.stderr
