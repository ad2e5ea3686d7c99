"""Commits overlapped with the next batches (``EmbeddingLoop(overlap_commits=True)``, ``stream.commit_behind``).

The daemon (directory and generator sources) seals a roll and publishes and
checkpoints it on a thread while it embeds the next batches. Checked here: the
same rows as without the overlap; a batch is embedded while a commit is still
running (a test that fails without the overlap); a roll's checkpoint only
after its file is published, one roll in flight; an error of the commit thread
raised by the loop with nothing checkpointed past it; a crash anywhere in a
commit loses nothing after a restart.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from streamembed.stream.checkpoint import Checkpointer, CheckpointStore
from streamembed.stream.commit_behind import CommitBehind
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.loop import EmbeddingLoop, RollPolicy
from streamembed.stream.read_ahead import ReadAhead
from streamembed.stream.sinks import DeadLetterSink, ParquetSink
from streamembed.stream.sources import DirectorySource

from .helpers import Crash, CrashOnCall, assert_each_id_once, dissimilarities, fitted, input_table, objects, write_arrow


def _input(indir: Path, files: int = 3, rows: int = 40) -> set[str]:
    indir.mkdir()
    ids: set[str] = set()
    for f in range(files):
        names = [f"f{f}-{i}" for i in range(rows)]
        write_arrow(indir / f"{f}.arrows", input_table(names, dissimilarities(objects(rows, seed=f))), chunk=8)
        ids.update(names)
    return ids


def _loop(indir: Path, out: Path, *, overlap: bool = True, roll_rows: int = 16) -> EmbeddingLoop:
    src = ReadAhead(DirectorySource(indir, batch_rows=8, settle_seconds=0.0, poll_seconds=0.01, exit_when_idle=True))
    output, dead = ParquetSink(out / "emb"), DeadLetterSink(out / "dead", source=src.name)
    store = CheckpointStore(out / "ck.json")
    checkpointer = Checkpointer([output, dead], src, store)
    checkpointer.restore(store.load())
    return EmbeddingLoop(BatchEmbedder(fitted(), method="projection"), src, output, dead, checkpointer,
                         roll=RollPolicy(roll_rows, 60.0), overlap_commits=overlap)


def _rows(out: Path) -> dict[str, list[float]]:
    t = pq.read_table(out / "emb")
    return dict(zip(t.column("id").to_pylist(), t.column("y0").to_pylist(), strict=True))


def test_the_overlapped_loop_writes_the_rows_and_files_of_the_plain_one(tmp_path: Path) -> None:
    ids = _input(tmp_path / "in")
    plain = _loop(tmp_path / "in", tmp_path / "a", overlap=False).run()
    over = _loop(tmp_path / "in", tmp_path / "b").run()
    assert _rows(tmp_path / "a") == _rows(tmp_path / "b") and set(_rows(tmp_path / "b")) == ids
    names = sorted(p.name for p in (tmp_path / "a" / "emb").glob("*.parquet"))
    assert names == sorted(p.name for p in (tmp_path / "b" / "emb").glob("*.parquet")) and len(names) > 3
    assert (plain.commits, plain.embedded) == (over.commits, over.embedded)
    a = CheckpointStore(tmp_path / "a" / "ck.json").load()
    b = CheckpointStore(tmp_path / "b" / "ck.json").load()
    assert a is not None and b is not None and a.sources == b.sources


def test_batches_are_embedded_while_a_commit_runs_and_its_checkpoint_follows_its_file(tmp_path: Path) -> None:
    _input(tmp_path / "in", files=1, rows=64)
    loop = _loop(tmp_path / "in", tmp_path / "out")
    events: list[str] = []
    release = threading.Event()
    output = loop.output
    real_seal, real_save, real_handle = output.seal, loop.checkpointer.store.save, loop.handle

    def seal(label: str):
        publish = real_seal(label)

        def slow() -> object:
            release.wait(10)  # the first commit is held until a batch was embedded meanwhile
            path = publish()
            events.append("published")
            return path
        events.append("sealed")
        return slow

    def save(ck) -> None:
        events.append("checkpoint")
        real_save(ck)

    def handle(batch) -> None:
        real_handle(batch)
        events.append("batch")
        if events.count("sealed") == 1:
            release.set()

    output.seal, loop.checkpointer.store.save, loop.handle = seal, save, handle
    loop.run()
    first = events.index("sealed")
    assert "batch" in events[first:events.index("published")]  # embedded while the first commit ran
    for k, i in enumerate(i for i, e in enumerate(events) if e == "sealed"):
        published = [j for j, e in enumerate(events) if e == "published"][k]
        checkpoint = [j for j, e in enumerate(events) if e == "checkpoint"][k]
        following = [j for j, e in enumerate(events) if e == "sealed" and j > i]
        assert i < published < checkpoint  # the file, then its checkpoint
        assert not following or checkpoint < following[0]  # the next roll is sealed only after it


def test_an_error_of_the_commit_thread_is_raised_by_the_loop_and_not_checkpointed(tmp_path: Path) -> None:
    _input(tmp_path / "in", files=1, rows=64)
    loop = _loop(tmp_path / "in", tmp_path / "out")
    real_seal = loop.output.seal

    def seal(label: str):
        real_seal(label)

        def fail() -> None:
            raise OSError(28, "No space left on device")
        return fail

    loop.output.seal = seal
    with pytest.raises(OSError, match="No space left"):
        loop.run()
    loop.source.close()
    assert not (tmp_path / "out" / "ck.json").exists()
    assert not list((tmp_path / "out" / "emb").glob("*.parquet"))


@pytest.mark.parametrize("where", ["publish", "checkpoint", "write"])
@pytest.mark.parametrize("after", [1, 2, 4])
def test_a_crash_anywhere_then_restart_loses_nothing(tmp_path: Path, where: str, after: int) -> None:
    ids = _input(tmp_path / "in")
    loop = _loop(tmp_path / "in", tmp_path / "out")
    bomb = CrashOnCall(after, where)

    if where == "publish":
        real_seal = loop.output.seal
        loop.output.seal = lambda label: bomb(real_seal(label))
    elif where == "checkpoint":
        loop.checkpointer.store.save = bomb(loop.checkpointer.store.save)
    else:
        loop.output.write = bomb(loop.output.write)
    with pytest.raises(Crash):
        loop.run()
    loop.source.close()
    _loop(tmp_path / "in", tmp_path / "out").run()  # a fresh process: new sinks, checkpoint reloaded
    assert_each_id_once(tmp_path / "out", ids)


def test_a_commit_is_counted_and_its_error_raised_while_the_source_is_idle(tmp_path: Path) -> None:
    """The loop collects a finished commit on its next turn, not at the next roll (idle, none may come)."""
    _input(tmp_path / "in", files=1, rows=16)
    for fail in (False, True):
        out = tmp_path / f"out-{fail}"
        src = ReadAhead(DirectorySource(tmp_path / "in", batch_rows=8, settle_seconds=0.0, poll_seconds=0.01))
        output, dead = ParquetSink(out / "emb"), DeadLetterSink(out / "dead", source=src.name)
        checkpointer = Checkpointer([output, dead], src, CheckpointStore(out / "ck.json"))
        loop = EmbeddingLoop(BatchEmbedder(fitted(), method="projection"), src, output, dead, checkpointer,
                             roll=RollPolicy(1000, 60.0), overlap_commits=True)  # commits when caught up
        if fail:
            real_seal = output.seal

            def seal(label: str, real_seal=real_seal):
                real_seal(label)

                def fail_() -> None:
                    raise OSError(28, "No space left on device")
                return fail_
            output.seal = seal
        real_poll, polls = src.poll, [0]

        def poll(real_poll=real_poll, polls=polls, loop=loop):
            polls[0] += 1
            if loop.stats.commits >= 1 or polls[0] > 200:  # idle: stop once the commit was counted (or give up)
                loop.stop.set()
            return real_poll()

        src.poll = poll
        if fail:
            with pytest.raises(OSError, match="No space left"):
                loop.run()
            assert polls[0] <= 200
        else:
            loop.run()
            assert loop.stats.commits >= 1 and polls[0] <= 200
        src.close()


def test_commit_behind_runs_one_at_a_time() -> None:
    behind: CommitBehind[int] = CommitBehind()
    assert behind.wait() is None
    behind.start(lambda: 7)
    with pytest.raises(RuntimeError, match="still running"):
        behind.start(lambda: 8)
    assert behind.wait() == 7 and not behind.busy
