"""One streaming path: the backfill task and ``embed`` drive the daemon's loop; shared words are written once."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

import streamembed
from streamembed.stream.sources import FileSource

from .helpers import dissimilarities, input_table, objects, write_parquet

PACKAGE = Path(streamembed.__file__).parent


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            for n in ast.walk(tree) if isinstance(n, ast.Call)}


def test_the_backfill_task_runs_the_loop_not_a_chunk_loop_of_its_own() -> None:
    calls = _calls(PACKAGE / "jobs" / "backfill.py")
    assert "EmbeddingLoop" in calls and not calls & {"iter_file", "process", "encode_dead_letters", "publish"}


def test_embed_rolls_at_the_end_and_counts_reasons_through_the_loop() -> None:
    text = (PACKAGE / "cli" / "embed.py").read_text()
    assert "RollPolicy.at_end()" in text and "1 << 62" not in text and "__getattr__" not in text


def test_the_file_changed_message_is_written_once() -> None:
    homes = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if "on were not read" in p.read_text()]
    assert homes == ["stream/readers/base.py"]


def test_a_row_range_of_a_file_is_read_with_its_file_rows(tmp_path: Path) -> None:
    ids = [f"x{i}" for i in range(100)]
    path = write_parquet(tmp_path / "in.parquet", input_table(ids, dissimilarities(objects(100))), row_group_size=20)
    src = FileSource([path], batch_rows=16, row_range=(40, 80), label="task")
    got, rows = [], []
    while (batch := src.poll()) is not None:
        assert batch.label == "task" and batch.origin.file == "in.parquet"
        got += batch.table.column("id").to_pylist()
        rows += batch.origin.numbers(batch.table.num_rows).tolist()
    assert src.exhausted and got == ids[40:80] and rows == list(range(40, 80))
    assert pq.ParquetFile(path).metadata.num_rows == 100 and np.all(np.diff(rows) == 1)
