"""Temporary files a killed daemon left are removed at the next start (issue 35: a stale ``.part-….tmp`` stayed in
``embeddings/`` after a kill -9), whoever's names they carry; one a live writer holds is left alone."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from tests.attacks import Proc, batch_env, model_file, output_ids, write_inputs

pytestmark = pytest.mark.e2e


def test_a_start_removes_the_temporary_files_a_killed_daemon_left(tmp_path: Path) -> None:
    model = model_file(tmp_path)
    ids = write_inputs(tmp_path / "in", 1, 20)
    root = tmp_path / "root"
    stale = [root / "embeddings" / ".part-kafka-t-p0-o000000000042.parquet.0123456789abcdef.tmp",
             root / "embeddings" / ".part-x0-w1234abcd.parquet.fedcba9876543210.tmp",
             root / "dead-letter" / ".dead-kafka-t-p1-o000000000007.jsonl.00112233aabbccdd.tmp",
             root / ".checkpoint.json.0a0b0c0d0e0f0a0b.tmp", root / "models" / ".model-v2.npz.1111222233334444.tmp"]
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"half a file")
    held = root / "embeddings" / ".part-other-wdeadbeef.parquet.5555666677778888.tmp"
    held.write_bytes(b"a live writer's")
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # what a live writer sharing the directory holds (fsafe.create_temp)
    try:
        p = Proc(tmp_path, batch_env(tmp_path / "in", root, model))
        assert p.wait(60) == 0, p.log()
    finally:
        os.close(fd)
    assert [s.name for s in stale if s.exists()] == []
    assert held.exists()
    assert set(output_ids(root / "embeddings")) == set(ids)
