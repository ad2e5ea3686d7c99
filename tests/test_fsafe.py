"""Safe file creation: exclusive random temporary names, no links followed, explicit modes whatever the umask."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from streamembed import fsafe
from streamembed.atomic import atomic_write_bytes
from streamembed.stream.checkpoint import Checkpoint, CheckpointError, CheckpointStore, CrashGuard


@pytest.fixture
def umask000():
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def test_temporary_files_are_new_random_and_private(tmp_path: Path, umask000) -> None:
    names = set()
    for _ in range(20):
        fh, path = fsafe.create_temp(tmp_path, "checkpoint.json")
        fh.close()
        assert path.parent == tmp_path and path.name.startswith(".checkpoint.json.") and path.name.endswith(".tmp")
        assert _mode(path) == 0o640
        names.add(path.name)
    assert len(names) == 20


def test_a_link_planted_at_a_temporary_name_is_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    os.symlink(victim, tmp_path / ".checkpoint.json.tmp")  # the old predictable name
    store = CheckpointStore(tmp_path / "checkpoint.json")
    store.save(Checkpoint(sources={"files": {}}))
    assert victim.read_text() == "precious"
    assert (tmp_path / "checkpoint.json").is_file() and not (tmp_path / "checkpoint.json").is_symlink()
    assert not (tmp_path / ".checkpoint.json.tmp").exists() and not (tmp_path / ".checkpoint.json.tmp").is_symlink()
    # appended and in-place state files refuse a link outright
    os.symlink(victim, tmp_path / "history.jsonl")
    with pytest.raises(OSError) as e:
        fsafe.open_append(tmp_path / "history.jsonl")
    assert e.value.errno == errno.ELOOP
    os.symlink(victim, tmp_path / "crash-guard.json")
    with pytest.raises(CheckpointError, match="crash-guard.json is unreadable"):
        CrashGuard(tmp_path / "crash-guard.json")
    assert victim.read_text() == "precious"


def test_modes_are_explicit_whatever_the_umask(tmp_path: Path, umask000) -> None:
    d = fsafe.make_dirs(tmp_path / "a" / "b")
    assert _mode(tmp_path / "a") == _mode(d) == 0o750
    atomic_write_bytes(d / "f", b"x")
    assert _mode(d / "f") == 0o640
    with fsafe.open_append(d / "h.jsonl") as fh:
        fh.write(b"{}\n")
    assert _mode(d / "h.jsonl") == 0o640
    old = fsafe.modes()
    try:
        fsafe.set_modes(0o600, 0o700, umask=False)
        atomic_write_bytes(d / "g", b"x")
        assert _mode(d / "g") == 0o600 and _mode(fsafe.make_dirs(tmp_path / "c")) == 0o700
        assert _mode(tmp_path / "a") == 0o750  # existing directories are left alone
    finally:
        fsafe.set_modes(*old, umask=False)


def test_set_modes_narrows_the_umask_for_files_made_elsewhere(tmp_path: Path) -> None:
    old_modes, old_umask = fsafe.modes(), os.umask(0)
    try:
        fsafe.set_modes(0o640, 0o750)
        (tmp_path / "plain").write_text("made by other code")
        assert _mode(tmp_path / "plain") == 0o640
    finally:
        fsafe.set_modes(*old_modes, umask=False)
        os.umask(old_umask)


@pytest.mark.parametrize("text, mode", [("0640", 0o640), ("640", 0o640), ("0o750", 0o750), ("2750", 0o2750)])
def test_parse_mode(text: str, mode: int) -> None:
    assert fsafe.parse_mode(text) == mode


@pytest.mark.parametrize("text", ["", "0x640", "888", "rw-r-----", "07777777"])
def test_parse_mode_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        fsafe.parse_mode(text)


def test_mode_settings_are_validated() -> None:
    from streamembed.config import ConfigError, load_config

    assert load_config(overrides={"output.file_mode": "0600", "output.dir_mode": "2770"}).output.dir_mode == "2770"
    for key, value, needle in [("output.file_mode", "0440", "read and write"), ("output.dir_mode", "0650", "use"),
                               ("output.file_mode", "4640", "special bits"), ("output.dir_mode", "x", "octal")]:
        with pytest.raises(ConfigError, match=needle):
            load_config(overrides={key: value})


def test_clean_temps_leaves_the_temporary_file_a_live_writer_holds(tmp_path):
    """Replicas share a Kafka output directory: one starting up must not remove the file another is writing."""
    import subprocess
    import sys

    from streamembed.fsafe import clean_temps, create_temp

    fh, live = create_temp(tmp_path, "part-x.parquet")
    fh.write(b"rows")
    crashed = tmp_path / ".part-y.parquet.0123456789abcdef.tmp"
    crashed.write_bytes(b"left by a crash")
    code = ("import sys; from streamembed.fsafe import clean_temps; "
            "print(clean_temps(sys.argv[1], 'part-*'))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
    assert live.exists() and not crashed.exists()
    fh.close()  # the writer is gone (a crash closes its files too): now it is a leftover
    assert clean_temps(tmp_path, "part-*", once=False) == 1 and not live.exists()


def _cleaner_runs_before(monkeypatch: pytest.MonkeyPatch, module: object, name: str, directory: Path,
                         glob: str) -> list[int]:
    """Make ``module.name`` (a rename) first run another writer's start-up clean of ``directory``: what it
    removed is recorded. (``flock`` conflicts between two open files of one process as between processes.)"""
    removed: list[int] = []
    real = getattr(module, name)

    def cleaned_then_renamed(*args: object, **kw: object) -> object:
        removed.append(fsafe.clean_temps(directory, glob, once=False))
        return real(*args, **kw)

    monkeypatch.setattr(module, name, cleaned_then_renamed)
    return removed


def test_a_temporary_file_is_renamed_while_its_writer_still_holds_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Two daemons share an output directory and one restarts between another's close and rename: the file
    must still be held (found by the shared-output soak: "No such file or directory" on the rename, exit 3)."""
    import streamembed.atomic as atomic

    removed = _cleaner_runs_before(monkeypatch, atomic.os, "replace", tmp_path, "*")
    atomic_write_bytes(tmp_path / "state.json", b"{}", clean=False)
    assert removed == [0] and (tmp_path / "state.json").read_bytes() == b"{}"


def test_a_parquet_part_is_published_while_its_writer_still_holds_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import streamembed.stream.sinks.parquet as parquet_sink

    removed = _cleaner_runs_before(monkeypatch, parquet_sink, "publish", tmp_path, "part-*")
    sink = parquet_sink.ParquetSink(tmp_path)
    sink.write(pa.table({"id": ["a", "b"]}), "batch-1")
    path = sink.flush("batch-1")
    assert removed == [0] and path is not None and pq.read_table(path).column("id").to_pylist() == ["a", "b"]


def test_a_name_removed_by_a_cleaner_before_it_was_locked_is_not_returned(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``create_temp``'s window between creating a name and locking it: a cleaner that took the file and
    removed it meanwhile must not leave the writer with an unlinked file (its rows would vanish on rename)."""
    real_flock = fsafe.fcntl.flock
    first: list[bool] = []

    def cleaner_wins_once(fd: int, op: int) -> None:
        if not first and op & fsafe.fcntl.LOCK_EX:
            first.append(True)
            for p in tmp_path.glob(".part-x.parquet.*.tmp"):
                p.unlink()  # what clean_temps does holding the lock, just before this writer locks it
        real_flock(fd, op)

    monkeypatch.setattr(fsafe.fcntl, "flock", cleaner_wins_once)
    fh, path = fsafe.create_temp(tmp_path, "part-x.parquet")
    with fh:
        assert first and path.exists() and os.fstat(fh.fileno()).st_ino == path.stat().st_ino
