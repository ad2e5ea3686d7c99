"""The directory index: glob semantics, a scan cost that does not grow with the files already read, symlinks."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest

from streamembed.stream.dirscan import RECHECK_PER_SCAN, DirectoryIndex, compile_pattern
from streamembed.stream.sources import DirectorySource

from .helpers import drain, input_table, write_parquet


@pytest.mark.parametrize("pattern, rel, matches", [
    ("**/*.parquet", "a.parquet", True),  # ** matches zero directories
    ("**/*.parquet", "x/y/a.parquet", True),
    ("**/*.parquet", "a.jsonl", False),
    ("*.parquet", "a.parquet", True),
    ("*.parquet", "x/a.parquet", False),  # * stays within one name
    ("sub/*.parquet", "sub/a.parquet", True),
    ("sub/*.parquet", "sub/x/a.parquet", False),
    ("sub/**/*.pq", "sub/a.pq", True),
    ("sub/**/*.pq", "sub/x/y/a.pq", True),
    ("sub/**/*.pq", "other/a.pq", False),
    ("**", "a/b/c.jsonl", True),
    ("*", "a.jsonl", True),
    ("?.jsonl", "a.jsonl", True),
    ("?.jsonl", "ab.jsonl", False),
    ("[ab]*.jsonl", "b1.jsonl", True),
    ("[!ab]*.jsonl", "b1.jsonl", False),
    ("data-**.jsonl", "data-x/y.jsonl", True),  # ** inside a name crosses directories
    ("a+b(1).jsonl", "a+b(1).jsonl", True),  # regex characters are literal
])
def test_glob_semantics(pattern: str, rel: str, matches: bool) -> None:
    regex, _ = compile_pattern(pattern)
    assert bool(regex.match(rel)) is matches


def _file(path: Path, ids: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_parquet(path, input_table(ids, np.ones((len(ids), 4), np.float32)))


def _ids(batches) -> list[str]:
    return sorted(i for b in batches if b.table is not None for i in b.table.column("id").to_pylist())


def test_double_star_slash_reads_top_level_files_too(tmp_path: Path) -> None:
    """``**/*.parquet`` matches zero or more directories: every top-level file is read too, hidden ones not."""
    for i in range(10):
        _file(tmp_path / f"t{i}.parquet", [f"t{i}"])
    _file(tmp_path / "sub" / "deep" / "d.parquet", ["d"])
    _file(tmp_path / ".hidden" / "h.parquet", ["h"])  # hidden directories are not entered
    src = DirectorySource(tmp_path, pattern="**/*.parquet", settle_seconds=0.0)
    assert _ids(drain(src)) == sorted([f"t{i}" for i in range(10)] + ["d"])


def test_a_scan_costs_what_changed_not_the_files_already_read(tmp_path: Path) -> None:
    n = 3 * RECHECK_PER_SCAN
    old = time.time() - 3600
    for i in range(n):
        p = tmp_path / f"f{i:05d}.jsonl"
        p.write_text('{"id": "x"}\n')
        os.utime(p, (old, old))
    os.utime(tmp_path, (old, old))  # the directory's own listing is settled too
    idx = DirectoryIndex(tmp_path, "*.jsonl")
    first = idx.scan()
    assert first.listed == 1 and len(first.hot) == n
    for _, rel, _ in first.hot:
        idx.cool(rel)
    quiet = idx.scan()
    assert quiet.listed == 0 and quiet.hot == [] and quiet.statted <= RECHECK_PER_SCAN
    # a new file: the directory changed, so it is listed again (names only) and the new file is hot
    (tmp_path / "new.jsonl").write_text('{"id": "n"}\n')
    new = idx.scan()
    assert new.listed == 1 and [rel for _, rel, _ in new.hot] == ["new.jsonl"]
    # a read file appended to in place (the directory does not change) is noticed by the round of rechecks
    with open(tmp_path / "f00007.jsonl", "a") as fh:
        fh.write('{"id": "y"}\n')
    seen = []
    for _ in range(n // RECHECK_PER_SCAN + 1):
        seen += [rel for _, rel, _ in idx.scan().hot]
    assert "f00007.jsonl" in seen
    # gone files are reported once
    (tmp_path / "f00001.jsonl").unlink()
    assert "f00001.jsonl" in idx.scan().gone


def test_a_file_just_written_stays_hot_after_it_was_read(tmp_path: Path) -> None:
    (tmp_path / "live.jsonl").write_text('{"id": "a"}\n')
    idx = DirectoryIndex(tmp_path, "*.jsonl", recheck=0)  # no round of rechecks: only hot files are seen
    idx.scan()
    idx.cool("live.jsonl")  # modified just now: stays hot
    with open(tmp_path / "live.jsonl", "a") as fh:
        fh.write('{"id": "b"}\n')
    assert [rel for _, rel, _ in idx.scan().hot] == ["live.jsonl"]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_symbolic_links_out_of_the_directory_are_not_followed(tmp_path: Path) -> None:
    """A link out of the watched directory (to /etc/passwd) is not followed: nothing of its target reaches the
    output or the dead letters."""
    watched, outside = tmp_path / "in", tmp_path / "secret"
    watched.mkdir()
    _file(outside / "s.parquet", ["secret"])
    (outside / "passwd.jsonl").write_text("root:x:0:0:root:/root:/bin/bash\n")
    os.symlink(outside / "s.parquet", watched / "s.parquet")
    os.symlink(outside / "passwd.jsonl", watched / "passwd.jsonl")
    os.symlink("/etc/passwd", watched / "etc.jsonl")
    os.symlink(outside, watched / "linked", target_is_directory=True)  # a symlinked directory is not entered
    _file(watched / "ok.parquet", ["ok"])
    os.symlink(watched / "ok.parquet", watched / "alias.parquet")  # a link inside the directory is read
    caplog = _Records()  # on the logger itself: setup_logging elsewhere may stop propagation to the root
    logging.getLogger("streamembed.source").addHandler(caplog)
    try:
        src = DirectorySource(watched, pattern="**/*", settle_seconds=0.0)
        batches = drain(src) + drain(src)
    finally:
        logging.getLogger("streamembed.source").removeHandler(caplog)
    assert _ids(batches) == ["ok", "ok"]
    assert not any(b.dead for b in batches)  # nothing of the outside files, not even as a dead letter
    warned = [r.getMessage() for r in caplog.records if "not followed" in r.getMessage()]
    assert len(warned) == 4 and any("etc.jsonl" in w for w in warned) and any("linked" in w for w in warned)
