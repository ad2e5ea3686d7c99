"""Through the real daemon: the files it writes and the root it holds.

* a link planted at the predictable ``.checkpoint.json.tmp`` is not followed;
* files 0640 and directories 0750 under umask 000;
* a file name with a newline and ESC bytes forges no log line and reaches the terminal escaped;
* deleting ``streamembed.pid`` does not let a second daemon run on the same root (``flock`` on the root);
* two daemons with their own roots, one embeddings and dead-letter directory, inputs of the same names:
  nothing overwritten, every file readable, every id once.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from pathlib import Path

import pytest

from ..stream.helpers import dissimilarities, fitted_model, input_table, objects, read_dead, read_ids, write_parquet
from .daemon import Daemon, directory_env, wait_for

pytestmark = [pytest.mark.e2e]


def _umask000(argv: list[str]) -> list[str]:
    return ["/bin/sh", "-c", 'umask 000; exec "$@"', "sh", *argv]


def _inputs(indir: Path, tag: str, files: int = 3, rows: int = 40) -> list[str]:
    indir.mkdir(parents=True, exist_ok=True)
    ids = []
    for f in range(files):
        these = [f"{tag}-{f}-{i}" for i in range(rows)]
        write_parquet(indir / f"in{f}.parquet", input_table(these, dissimilarities(objects(rows, seed=f + 7))))
        ids += these
    return ids


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode) for p in [root, *root.rglob("*")]
            if not p.name.startswith("daemon-") and not p.name.startswith("port-")}


def test_files_are_created_safely_whatever_the_umask(tmp_path: Path) -> None:
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    indir, out = tmp_path / "in", tmp_path / "out"
    ids = _inputs(indir, "a")
    evil = "evil\n2026-01-01 00:00:00,000 ERROR streamembed.daemon: forged\x1b[2J.jsonl"
    (indir / evil).write_text("not json\n")
    out.mkdir()
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    os.symlink(target, out / ".checkpoint.json.tmp")  # the predictable name of older versions
    env = directory_env(indir, out, model, STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE="true",
                        STREAMEMBED_LOGGING__FORMAT="text", STREAMEMBED_METRICS__ENABLED="false")
    d = Daemon(tmp_path, env, wrap=_umask000)
    code = d.wait(60)
    log = d.log()
    assert code == 0, log
    assert target.read_text() == "precious\n"
    ckpt = out / "checkpoint.json"
    assert ckpt.is_file() and not ckpt.is_symlink()
    assert not list(out.glob(".*.tmp"))  # the planted link is removed (not followed), no temporary file is left
    assert sorted(read_ids(out / "embeddings", "*.parquet")) == sorted(ids)
    # modes: umask 000 would have made 0666 files and 0777 directories
    for rel, mode in _modes(out).items():
        path = out / rel if rel != "." else out
        if path.is_dir():
            assert mode == 0o750 or path == out, (rel, oct(mode))
        else:
            assert mode == 0o640, (rel, oct(mode))
    assert {r["reason"] for r in read_dead(out / "dead-letter")} == {"undecodable"}
    # the evil name is logged escaped: no forged line, no raw ESC
    assert "\x1b" not in log
    assert not any(line.startswith("2026-01-01") for line in log.splitlines()), log
    assert "evil\\n2026-01-01" in log


def test_the_root_lock_is_the_directory_not_the_pid_file(tmp_path: Path) -> None:
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    indir, out = tmp_path / "in", tmp_path / "out"
    _inputs(indir, "a", files=1)
    env = directory_env(indir, out, model)
    first = Daemon(tmp_path, env)
    try:
        first.wait_port()
        wait_for(lambda: (out / "streamembed.pid").exists(), 20, "the pid file", first)
        (out / "streamembed.pid").unlink()
        second = Daemon(tmp_path, env)
        code = second.wait(60)
        log = second.log()
        assert code == 3, log
        assert "another streamembed daemon" in log and "is running with this output.root" in log
        assert not first.dead() and first.get("/healthz")[0] == 200
        assert first.terminate() == 0
    finally:
        first.close()


def test_two_daemons_with_their_own_roots_share_an_output_directory(tmp_path: Path) -> None:
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    shared = tmp_path / "shared"
    runs = []
    expected: list[str] = []
    for name in ("a", "b"):
        indir = tmp_path / f"in-{name}"
        expected += _inputs(indir, name, files=4, rows=250)
        (indir / "bad.jsonl").write_text(f'{{"id": "{name}-bad"}}\n')  # a dead letter of the same file name
        env = directory_env(indir, tmp_path / f"root-{name}", model, STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE="true",
                            STREAMEMBED_OUTPUT__EMBEDDINGS_DIR=str(shared / "embeddings"),
                            STREAMEMBED_OUTPUT__DEAD_LETTER_DIR=str(shared / "dead-letter"),
                            STREAMEMBED_METRICS__ENABLED="false", STREAMEMBED_SOURCE__BATCH_ROWS="50")
        runs.append(Daemon(tmp_path, env))
    codes = [d.wait(90) for d in runs]
    assert codes == [0, 0], [d.log() for d in runs]
    got = Counter(read_ids(shared / "embeddings", "*.parquet"))  # every file readable
    assert sorted(got) == sorted(expected) and set(got.values()) == {1}
    assert sorted(r["id"] for r in read_dead(shared / "dead-letter")) == ["a-bad", "b-bad"]
    tags = {p.name.rsplit("-w", 1)[1] for p in (shared / "embeddings").glob("*.parquet")}
    assert len(tags) == 2  # one writer id per root
    assert not list(shared.rglob(".*.tmp"))
