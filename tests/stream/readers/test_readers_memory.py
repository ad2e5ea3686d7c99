"""Large files are read in bounded memory: the read size follows the memory limit, never the file size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamembed import memlimit
from streamembed.memlimit import MemoryLimit
from streamembed.stream.readers import opening, parquet, slabs
from streamembed.stream.readers import iter_file, open_input
from tests.stream.helpers import input_table

MIB = 1 << 20


def _limit(monkeypatch: pytest.MonkeyPatch, nbytes: int) -> None:
    monkeypatch.setattr(memlimit, "current_limit", lambda: MemoryLimit(nbytes, "test"))
    monkeypatch.setattr(parquet, "current_limit", lambda: MemoryLimit(nbytes, "test"))
    for module in (opening, slabs):
        monkeypatch.setattr(module, "read_budget", lambda: memlimit.read_budget(MemoryLimit(nbytes, "test")))


def _big_parquet(path: Path, rows: int, row_group: int) -> Path:
    """``rows`` rows of 480 random float32 (~1.9 KB a row, incompressible), in row groups of ``row_group``."""
    ids = [f"x{i}" for i in range(rows)]
    big = np.random.default_rng(0).uniform(1.0, 5.0, (rows, 480)).astype(np.float32)
    tmp = path.with_name("." + path.name)
    pq.write_table(input_table(ids, big, event_time=False), tmp, row_group_size=row_group, compression="none",
                   use_dictionary=False)
    tmp.rename(path)
    return path


def test_a_file_over_the_read_budget_is_streamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _big_parquet(tmp_path / "big.parquet", 12_000, 1000)  # ~23 MB
    _limit(monkeypatch, 256 * MIB)  # budget 16 MiB
    opened = open_input(path)
    assert opened.snapshot is None  # streamed, not read whole
    opened.close()
    _limit(monkeypatch, 8 << 30)  # budget 512 MiB: read whole
    opened = open_input(path)
    assert opened.snapshot is not None
    opened.close()


def test_a_streamed_parquet_file_holds_about_one_row_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Parquet file read in a stream holds about one row group in memory at a time, not every row group it
    was asked for (the whole file)."""
    path = _big_parquet(tmp_path / "big.parquet", 24_000, 1000)  # ~46 MB
    size = path.stat().st_size
    _limit(monkeypatch, 256 * MIB)
    pool = pa.default_memory_pool()
    base = pool.bytes_allocated()
    peak = rows = 0
    for chunk in iter_file(path, batch_rows=500):
        rows += chunk.end_row - chunk.start_row
        peak = max(peak, pool.bytes_allocated() - base)
    assert rows == 24_000
    assert peak < size / 4, (peak, size)  # a few row groups (~2 MB each), not the 46 MB file


def test_a_row_group_too_large_for_the_memory_limit_is_refused_not_read(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = _big_parquet(tmp_path / "one.parquet", 12_000, 12_000)  # one ~23 MB row group
    _limit(monkeypatch, 64 * MIB)  # a row group may take a quarter: 16 MiB
    (chunk,) = list(iter_file(path, batch_rows=500))
    assert chunk.table is None and len(chunk.dead) == 1
    assert chunk.dead[0].reason == "unreadable_file" and "row group 0" in chunk.dead[0].detail
    assert "smaller row groups" in chunk.dead[0].detail


def test_running_out_of_memory_is_never_a_dead_letter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _big_parquet(tmp_path / "big.parquet", 3000, 1000)
    _limit(monkeypatch, 256 * MIB)
    real = parquet.pq.ParquetFile.iter_batches

    def failing(self, *a, **k):
        for i, b in enumerate(real(self, *a, **k)):
            if i == 2:
                raise pa.ArrowMemoryError("malloc of size 67440832 failed")
            yield b

    monkeypatch.setattr(parquet.pq.ParquetFile, "iter_batches", failing)
    with pytest.raises(MemoryError):
        list(iter_file(path, batch_rows=500))
