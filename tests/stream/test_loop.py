"""The loop: every input id ends up in the output or the dead letters, across crashes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from streamembed.stream.checkpoint import CheckpointStore
from streamembed.settings import GeneratorConfig
from streamembed.stream.generator import GaussianMixtureStream, GeneratorSource
from streamembed.stream.loop import EmbeddingLoop, LoopSettings
from streamembed.stream.records import Reason
from streamembed.stream.sinks import DeadLetterSink, ParquetSink
from streamembed.stream.sources import DirectorySource

from .helpers import (dissimilarities, fitted, input_table, objects, read_dead, read_ids, write_arrow,
                      write_jsonl, write_parquet)


class Crash(Exception):
    pass


def _corpus(indir: Path) -> set[str]:
    """Three files, 70 objects, a few bad rows; returns every id written."""
    indir.mkdir()
    ids: set[str] = set()
    Z = objects(70)
    A = dissimilarities(Z)
    a_ids = [f"p{i}" for i in range(30)]
    A[3, 0] = np.nan
    A[4, 1] = -1.0
    write_parquet(indir / "a.parquet", input_table(a_ids, A[:30]), row_group_size=8)
    b_ids = [f"s{i}" for i in range(25)]
    write_arrow(indir / "b.arrows", input_table(b_ids, A[30:55]), chunk=6)
    c_ids = [f"j{i}" for i in range(15)]
    write_jsonl(indir / "c.jsonl", [{"id": i, "dissimilarities": a.tolist()} for i, a in zip(c_ids, A[55:].astype(float))])
    ids.update(a_ids, b_ids, c_ids)
    return ids


def _loop(indir: Path, out: Path, *, est=None, settings: LoopSettings | None = None) -> EmbeddingLoop:
    est = est or fitted()
    src = DirectorySource(indir, batch_rows=8, settle_seconds=0.0, poll_seconds=0.01, exit_when_idle=True)
    return EmbeddingLoop(est, src, ParquetSink(out / "emb"), DeadLetterSink(out / "dead", source=src.name),
                         CheckpointStore(out / "ck.json"), settings=settings or LoopSettings(roll_rows=20))


def test_every_input_id_is_output_or_dead_letter(tmp_path: Path) -> None:
    ids = _corpus(tmp_path / "in")
    loop = _loop(tmp_path / "in", tmp_path / "out")
    loop.restore()
    stats = loop.run()
    out_ids = read_ids(tmp_path / "out" / "emb", "*.parquet")
    dead = read_dead(tmp_path / "out" / "dead")
    assert Counter(out_ids + [d["id"] for d in dead]) == Counter(ids)
    assert {(d["id"], d["reason"]) for d in dead} == {("p3", Reason.NON_FINITE), ("p4", Reason.NEGATIVE)}
    assert stats.records_in == len(ids) and stats.embedded == len(ids) - 2 and stats.dead == 2
    table = pq.read_table(tmp_path / "out" / "emb")
    assert table.schema.field("y").type.list_size == 2


def test_float32_input_reaches_the_core_as_float32(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamembed.core import placement

    seen = []
    real = placement.place

    def spy(model, A, *a, **k):
        seen.append(A.dtype)
        return real(model, A, *a, **k)

    monkeypatch.setattr(placement, "place", spy)
    _corpus(tmp_path / "in")
    loop = _loop(tmp_path / "in", tmp_path / "out")
    loop.run()
    # Parquet and Arrow batches (4 + 4) carry float32; JSON numbers parse as float64 (2 batches)
    assert Counter(seen) == {np.dtype(np.float32): 8, np.dtype(np.float64): 2}


@pytest.mark.parametrize("where", ["output.flush", "dead.flush", "checkpoint", "write"])
@pytest.mark.parametrize("after", [1, 2, 4])
def test_crash_anywhere_then_restart_loses_nothing(tmp_path: Path, where: str, after: int) -> None:
    ids = _corpus(tmp_path / "in")
    loop = _loop(tmp_path / "in", tmp_path / "out")
    calls = {"n": 0}

    def bomb(real):
        def f(*a, **k):
            calls["n"] += 1
            if calls["n"] == after:
                raise Crash(where)
            return real(*a, **k)
        return f

    if where == "output.flush":
        loop.output.flush = bomb(loop.output.flush)
    elif where == "dead.flush":
        loop.dead.flush = bomb(loop.dead.flush)
    elif where == "checkpoint":
        loop.checkpoints.save = bomb(loop.checkpoints.save)
    else:
        loop.output.write = bomb(loop.output.write)
    loop.restore()
    with pytest.raises(Crash):
        loop.run()
    again = _loop(tmp_path / "in", tmp_path / "out")  # a fresh process: new sinks, checkpoint reloaded
    again.restore()
    again.run()
    out_ids = read_ids(tmp_path / "out" / "emb", "*.parquet")
    dead_ids = [d["id"] for d in read_dead(tmp_path / "out" / "dead")]
    seen = Counter(out_ids + dead_ids)
    assert set(seen) == ids
    # the replay rewrites the files of the unfinished roll under the same names
    assert all(c == 1 for c in seen.values()), {k: c for k, c in seen.items() if c > 1}


def test_stop_event_finishes_the_batch_flushes_and_commits(tmp_path: Path) -> None:
    _corpus(tmp_path / "in")
    loop = _loop(tmp_path / "in", tmp_path / "out", settings=LoopSettings(roll_rows=10_000, roll_seconds=60))
    real = loop.handle

    def handle_then_stop(batch):
        real(batch)
        loop.stop.set()

    loop.handle = handle_then_stop
    stats = loop.run()
    assert stats.batches == 1 and stats.commits == 1
    assert len(read_ids(tmp_path / "out" / "emb", "*.parquet")) == 6  # p3, p4 are dead letters
    assert len(read_dead(tmp_path / "out" / "dead")) == 2
    ck = CheckpointStore(tmp_path / "out" / "ck.json").load()
    assert ck.sources["files"]["current"]["row"] == 8


def test_limits_bound_the_run(tmp_path: Path) -> None:
    _corpus(tmp_path / "in")
    loop = _loop(tmp_path / "in", tmp_path / "out", settings=LoopSettings(max_batches=3))
    assert loop.run().batches == 3
    loop2 = _loop(tmp_path / "in", tmp_path / "out2",
                  settings=LoopSettings(max_records=20))
    assert loop2.run().records_in >= 20


def test_generator_source_resumes_with_the_same_objects(tmp_path: Path) -> None:
    est = fitted(features=True)
    spec = GeneratorConfig(seed=3, n_features=3, intrinsic_dims=2)

    def run(out: Path, batches: int) -> list[str]:
        src = GeneratorSource(GaussianMixtureStream(spec), batch_rows=16, max_batches=batches)
        loop = EmbeddingLoop(est, src, ParquetSink(out / "emb"), DeadLetterSink(out / "dead"),
                             CheckpointStore(out / "ck.json"), settings=LoopSettings(roll_rows=32))
        loop.restore()
        loop.run()
        return read_ids(out / "emb", "*.parquet")

    run(tmp_path / "a", 3)
    resumed = run(tmp_path / "a", 5)
    straight = run(tmp_path / "b", 5)
    assert sorted(resumed) == sorted(straight) and len(straight) == 80
    ya = pq.read_table(tmp_path / "a" / "emb").sort_by("id").column("y").to_pylist()
    yb = pq.read_table(tmp_path / "b" / "emb").sort_by("id").column("y").to_pylist()
    np.testing.assert_allclose(ya, yb)
