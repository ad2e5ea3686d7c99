"""The one loop: every input id ends up in the output or the dead letters, across crashes, with the core's numbers."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from streamembed.config.schema import GeneratorConfig, RunConfig
from streamembed.stream.checkpoint import Checkpointer, CheckpointStore, CrashGuard
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.sources.generator import GaussianMixtureStream, GeneratorSource
from streamembed.stream.loop import EmbeddingLoop, RollPolicy
from streamembed.stream.read_ahead import ReadAhead
from streamembed.stream.records import Reason
from streamembed.stream.sinks import DeadLetterSink, ParquetSink
from streamembed.stream.sources import DirectorySource
from streamembed.stream.output import y_columns, y_matrix

from .helpers import (Crash, CrashOnCall, assert_each_id_once, dissimilarities, fitted, input_table, objects,
                      read_dead, read_ids, write_arrow, write_jsonl, write_parquet)


def _corpus(indir: Path) -> tuple[set[str], np.ndarray]:
    """Three files, 70 objects, two bad rows; returns every id written and the (70, n) rows."""
    indir.mkdir()
    A = dissimilarities(objects(70))
    a_ids = [f"p{i}" for i in range(30)]
    A[3, 0] = np.nan
    A[4, 1] = -1.0
    write_parquet(indir / "a.parquet", input_table(a_ids, A[:30]), row_group_size=8)
    b_ids = [f"s{i}" for i in range(25)]
    write_arrow(indir / "b.arrows", input_table(b_ids, A[30:55]), chunk=6)
    c_ids = [f"j{i}" for i in range(15)]
    write_jsonl(indir / "c.jsonl", [{"id": i, "dissimilarities": a.tolist()}
                                    for i, a in zip(c_ids, A[55:].astype(float), strict=True)])
    return set(a_ids + b_ids + c_ids), A


def _loop(indir: Path, out: Path, *, model=None, run: RunConfig | None = None, roll_rows: int = 20,
          roll_seconds: float = 5.0, method: str = "projection", guard: CrashGuard | None = None) -> EmbeddingLoop:
    """A loop as the daemon builds it (read-ahead source, checkpointer), restored from its checkpoint."""
    model = model or fitted()
    src = ReadAhead(DirectorySource(indir, batch_rows=8, settle_seconds=0.0, poll_seconds=0.01, exit_when_idle=True))
    output, dead = ParquetSink(out / "emb"), DeadLetterSink(out / "dead", source=src.name)
    store = CheckpointStore(out / "ck.json")
    checkpointer = Checkpointer([output, dead], src, store)
    checkpointer.restore(store.load())
    return EmbeddingLoop(BatchEmbedder(model, method=method), src, output, dead, checkpointer, run=run,
                         roll=RollPolicy(roll_rows, roll_seconds), crash_guard=guard)


def test_every_input_id_is_output_or_dead_letter(tmp_path: Path) -> None:
    ids, _ = _corpus(tmp_path / "in")
    stats = _loop(tmp_path / "in", tmp_path / "out").run()
    out_ids = read_ids(tmp_path / "out" / "emb", "*.parquet")
    dead = read_dead(tmp_path / "out" / "dead")
    assert Counter(out_ids + [d["id"] for d in dead]) == Counter(ids)
    assert {(d["id"], d["reason"]) for d in dead} == {("p3", Reason.NON_FINITE), ("p4", Reason.NEGATIVE)}
    assert stats.records_in == len(ids) and stats.embedded == len(ids) - 2 and stats.dead == 2
    assert y_columns(pq.read_table(tmp_path / "out" / "emb").schema) == ["y0", "y1"]


def test_the_loop_counts_dead_letters_by_reason_with_the_first_of_each(tmp_path: Path) -> None:
    _corpus(tmp_path / "in")
    stats = _loop(tmp_path / "in", tmp_path / "out").run()
    assert stats.failed_by_reason == {Reason.NON_FINITE: 1, Reason.NEGATIVE: 1}
    assert (stats.first_dead[Reason.NEGATIVE].id, stats.first_dead[Reason.NEGATIVE].row) == ("p4", 4)


def test_the_at_end_policy_publishes_once_when_the_source_is_exhausted(tmp_path: Path) -> None:
    assert not RollPolicy.at_end().due(1 << 62, 1e18)
    ids, _ = _corpus(tmp_path / "in")
    loop = _loop(tmp_path / "in", tmp_path / "out")
    loop.roll = RollPolicy.at_end()
    stats = loop.run()
    # version-2 output keeps the input's precision: the float32 files (Parquet, Arrow) and the float64 JSON lines
    # are two files, the first published when the precision changes, the second at the end; nothing else rolls
    assert stats.commits == 2 and len(list((tmp_path / "out" / "emb").glob("*.parquet"))) == 2
    assert stats.embedded == len(ids) - 2


@pytest.mark.parametrize("method", ["projection", "restricted"])
def test_the_loop_writes_exactly_what_the_model_places(tmp_path: Path, method: str) -> None:
    _, A = _corpus(tmp_path / "in")
    model = fitted()
    _loop(tmp_path / "in", tmp_path / "out", model=model, method=method).run()
    table = pq.read_table(tmp_path / "out" / "emb")
    ids = table.column("id").to_pylist()
    y = y_matrix(table)
    order = ({f"p{i}": i for i in range(30)} | {f"s{i}": 30 + i for i in range(25)}
             | {f"j{i}": 55 + i for i in range(15)})
    rows = np.array([order[i] for i in ids])
    ok = np.ones(70, dtype=bool)
    ok[[3, 4]] = False
    # float32 files (a, b) through float32 kernels, the JSON file (c) in float64: as the core does it
    want = np.empty((70, 2))
    want[:55][ok[:55]] = model.place(A[:55][ok[:55]], method=method).y
    want[55:] = model.place(A[55:].astype(np.float64), method=method).y
    np.testing.assert_allclose(y, want[rows], rtol=1e-6, atol=1e-6)
    assert sorted(rows.tolist()) == np.flatnonzero(ok).tolist()


def test_float32_input_reaches_the_core_as_float32(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamembed.core.place.placer import Placer

    seen = []
    real = Placer.place

    def spy(placer, A, *a, **k):
        seen.append(A.dtype)
        return real(placer, A, *a, **k)

    monkeypatch.setattr(Placer, "place", spy)
    _corpus(tmp_path / "in")
    _loop(tmp_path / "in", tmp_path / "out").run()
    # Parquet and Arrow batches (4 + 4) carry float32; JSON numbers parse as float64 (2 batches)
    assert Counter(seen) == {np.dtype(np.float32): 8, np.dtype(np.float64): 2}


@pytest.mark.parametrize("where", ["output.flush", "dead.flush", "checkpoint", "write"])
@pytest.mark.parametrize("after", [1, 2, 4])
def test_crash_anywhere_then_restart_loses_nothing(tmp_path: Path, where: str, after: int) -> None:
    ids, _ = _corpus(tmp_path / "in")
    loop = _loop(tmp_path / "in", tmp_path / "out")
    bomb = CrashOnCall(after, where)

    if where == "output.flush":
        loop.output.flush = bomb(loop.output.flush)
    elif where == "dead.flush":
        loop.dead.flush = bomb(loop.dead.flush)
    elif where == "checkpoint":
        loop.checkpointer.store.save = bomb(loop.checkpointer.store.save)
    else:
        loop.output.write = bomb(loop.output.write)
    with pytest.raises(Crash):
        loop.run()
    loop.source.close()
    _loop(tmp_path / "in", tmp_path / "out").run()  # a fresh process: new sinks, checkpoint reloaded
    # the replay rewrites the files of the unfinished roll under the same names
    assert_each_id_once(tmp_path / "out", ids)


def test_a_batch_that_keeps_crashing_the_process_is_quarantined(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ids, _ = _corpus(tmp_path / "in")
    from streamembed.stream import embedder

    real = embedder.BatchEmbedder.process

    def dies_on_s(self, table, **kw):
        if "s0" in table.column("id").to_pylist():
            raise SystemExit("segfault stand-in: not an Exception, so nothing contains it")
        return real(self, table, **kw)

    monkeypatch.setattr(embedder.BatchEmbedder, "process", dies_on_s)
    guard_path = tmp_path / "out" / "crash-guard.json"
    (tmp_path / "out").mkdir()
    for _ in range(3):  # three processes die in the same batch
        loop = _loop(tmp_path / "in", tmp_path / "out", guard=CrashGuard(guard_path, 3))
        with pytest.raises(SystemExit):
            loop.run()
        loop.source.close()
    loop = _loop(tmp_path / "in", tmp_path / "out", guard=CrashGuard(guard_path, 3))
    loop.run()
    dead = read_dead(tmp_path / "out" / "dead")
    quarantined = [d["id"] for d in dead if d["reason"] == Reason.QUARANTINED]
    assert quarantined == [f"s{i}" for i in range(8)]  # the first batch of the Arrow file (8 rows), nothing else
    seen = Counter(read_ids(tmp_path / "out" / "emb", "*.parquet") + [d["id"] for d in dead])
    assert set(seen) == ids


def test_stop_event_finishes_the_batch_flushes_and_commits(tmp_path: Path) -> None:
    _corpus(tmp_path / "in")
    loop = _loop(tmp_path / "in", tmp_path / "out", roll_rows=10_000, roll_seconds=60)
    real = loop.handle

    def handle_then_stop(batch):
        real(batch)
        loop.stop.set()

    loop.handle = handle_then_stop
    stats = loop.run()
    loop.source.close()
    assert stats.batches == 1 and stats.commits == 1
    assert len(read_ids(tmp_path / "out" / "emb", "*.parquet")) == 6  # p3, p4 are dead letters
    assert len(read_dead(tmp_path / "out" / "dead")) == 2
    ck = CheckpointStore(tmp_path / "out" / "ck.json").load()
    assert ck.sources["files"]["current"]["row"] == 8


def test_limits_bound_the_run(tmp_path: Path) -> None:
    _corpus(tmp_path / "in")
    stats = _loop(tmp_path / "in", tmp_path / "out", run=RunConfig(max_batches=3)).run()
    assert stats.batches == 3 and stats.records_in == 24
    stats = _loop(tmp_path / "in", tmp_path / "out2", run=RunConfig(max_records=20)).run()
    assert stats.records_in == 24 and stats.batches == 3  # stops at the first batch boundary past 20


def test_generator_source_resumes_with_the_same_objects(tmp_path: Path) -> None:
    model = fitted(features=True)
    spec = GeneratorConfig(seed=3, n_features=3, intrinsic_dims=2)

    def run(out: Path, batches: int) -> list[str]:
        src = ReadAhead(GeneratorSource(GaussianMixtureStream(spec), batch_rows=16, max_batches=batches))
        output, dead = ParquetSink(out / "emb"), DeadLetterSink(out / "dead")
        store = CheckpointStore(out / "ck.json")
        checkpointer = Checkpointer([output, dead], src, store)
        checkpointer.restore(store.load())
        EmbeddingLoop(BatchEmbedder(model), src, output, dead, checkpointer,
                      roll=RollPolicy(rows=32)).run()
        src.close()
        return read_ids(out / "emb", "*.parquet")

    run(tmp_path / "a", 3)
    resumed = run(tmp_path / "a", 5)
    straight = run(tmp_path / "b", 5)
    assert sorted(resumed) == sorted(straight) and len(straight) == 80
    ya = y_matrix(pq.read_table(tmp_path / "a" / "emb").sort_by("id"))
    yb = y_matrix(pq.read_table(tmp_path / "b" / "emb").sort_by("id"))
    np.testing.assert_allclose(ya, yb)


def test_on_batch_sees_each_batch_after_its_rows_went_to_the_sinks(tmp_path: Path) -> None:
    _corpus(tmp_path / "in")
    loop = _loop(tmp_path / "in", tmp_path / "out")
    seen: list = []

    def hook(done) -> None:
        assert loop.output.pending_rows >= done.n_out  # handed to the sink already
        seen.append(done)

    loop.on_batch = hook
    stats = loop.run()
    hooked = [i for d in seen if d.output is not None for i in d.output.column("id").to_pylist()]
    assert Counter(hooked) == Counter(read_ids(tmp_path / "out" / "emb", "*.parquet"))
    assert len(hooked) == stats.embedded and sum(len(d.dead) for d in seen) == stats.dead == 2


def test_blas_runs_on_one_thread_while_the_loop_runs_and_as_before_after(tmp_path: Path) -> None:
    """The loop's narrow products on one BLAS thread (a woken OpenBLAS worker spins after each), restored after."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {int(lib["num_threads"]) for lib in threadpool_info() if lib["user_api"] == "blas"}

    _corpus(tmp_path / "in")
    loop = _loop(tmp_path / "in", tmp_path / "out")
    inside: list[set[int]] = []
    loop.on_batch = lambda done: inside.append(blas_threads())
    with threadpool_limits(2, user_api="blas"):
        before = blas_threads()
        loop.run()
        after = blas_threads()
    assert inside and all(t == {1} for t in inside)
    assert before == after == {2}
