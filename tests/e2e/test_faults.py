"""Faults that are not records: slow and huge batches, files written in place, permissions, corrupt state,
a full disk, a killed refit, a stale pid file, and the exit codes a supervisor acts on.

Every daemon is the real CLI in a subprocess; permission faults run it as the
real user nobody (tests/e2e/unprivileged.py); the full disk is a real tmpfs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.spatial.distance import cdist

from streamembed.stream.output import flag_names_of, y_matrix

from ..stream.helpers import (dissimilarities, fitted_model, input_table, list_column, objects, read_dead, read_ids,
                              write_jsonl, write_parquet)
from . import unprivileged
from .daemon import SOURCE_ROOT, Daemon, child_env, directory_env, wait_for

pytestmark = pytest.mark.e2e


def _need_root() -> None:
    why = unprivileged.unavailable()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs as root: {why}", pytrace=False)
        pytest.skip(why)


def _lines(ids: list[str], seed: int) -> list[dict[str, object]]:
    A = dissimilarities(objects(len(ids), seed=seed), dtype=np.float64)
    return [{"id": i, "dissimilarities": a.tolist()} for i, a in zip(ids, A, strict=True)]


def _model(tmp_path: Path) -> Path:
    path = tmp_path / "model.npz"
    fitted_model().save(path)
    return path


# ----------------------------------------------------------------------------- a slow map: l1 on 500 landmarks

SLOW_N = 500


def _slow_model(path: Path) -> np.ndarray:
    """A 500-landmark model (an l1 batch of 4,096 rows takes ~15 s here); returns its landmark points."""
    from streamembed import LandmarkMDS

    L = np.random.default_rng(11).standard_normal((SLOW_N, 5)) * 3.0
    LandmarkMDS(n_components=2).fit(cdist(L, L)).save(path)
    return L


def _slow_rows(L: np.ndarray, ids: list[str], seed: int) -> pa.Table:
    Z = np.random.default_rng(seed).standard_normal((len(ids), L.shape[1])) * 3.0
    return pa.table({"id": pa.array(ids), "dissimilarities": list_column(cdist(Z, L))})


def _in_flight(root: Path, since_ns: int = 0) -> str | None:
    """The batch the daemon is processing now (its crash guard's record, written after ``since_ns``), or None."""
    path = root / "crash-guard.json"
    try:
        if path.stat().st_mtime_ns < since_ns:
            return None
        return json.loads(path.read_text()).get("current")
    except (OSError, ValueError):
        return None


@pytest.mark.slow
def test_huge_rows_with_l1_then_sigterm_mid_batch_then_the_batch_is_read_again(tmp_path: Path) -> None:
    """Rows of 1e100 with method l1 are out_of_range dead letters (no inf, no endless loop); a
    SIGTERM in the middle of a long l1 batch stops the daemon at once (exit 0, the batch not written), and
    the restart reads that batch again."""
    model = tmp_path / "slow.npz"
    L = _slow_model(model)
    indir, out = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    small = _slow_rows(L, [f"h{i}" for i in range(8)], seed=1)
    A = np.asarray(small.column("dissimilarities").combine_chunks().flatten()).reshape(8, SLOW_N).copy()
    A[2, :] = 1e100
    A[5, 7] = 1e300
    write_parquet(indir / "a-huge.parquet", pa.table({"id": small.column("id"), "dissimilarities": list_column(A)}))
    env = directory_env(indir, out, model, STREAMEMBED_MODEL__METHOD="l1", STREAMEMBED_SOURCE__BATCH_ROWS="4096",
                        STREAMEMBED_MODEL__MAX_BATCH_SECONDS="120", STREAMEMBED_METRICS__WEDGED_AFTER_SECONDS="60",
                        STREAMEMBED_OUTPUT__DEAD_LETTER_FORMAT="jsonl")
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()
        wait_for(lambda: len(read_ids(out / "embeddings", "*.parquet")) == 6 and len(read_dead(out / "dead-letter"))
                 == 2, 30, "the huge rows handled", d)
        assert {(r["id"], r["reason"]) for r in read_dead(out / "dead-letter")} == {("h2", "out_of_range"),
                                                                                     ("h5", "out_of_range")}
        t = pq.read_table(out / "embeddings")
        assert np.isfinite(y_matrix(t)).all()
        assert np.isfinite(t.column("unexplained").to_numpy()).all()
        assert d.get("/healthz")[0] == 200
        # a long l1 batch: SIGTERM while it runs
        big_ids = [f"b{i}" for i in range(4096)]
        write_parquet(indir / "b-big.parquet", _slow_rows(L, big_ids, seed=2))
        wait_for(lambda: (_in_flight(out) or "").startswith("files-b-big"), 30, "the big batch in flight", d)
        time.sleep(1.0)
        assert d.get("/healthz")[0] == 200
        t0 = time.monotonic()
        assert d.terminate(timeout=30) == 0
        stopped_in = time.monotonic() - t0
    finally:
        d.close()
    assert stopped_in < 5.0, f"SIGTERM took {stopped_in:.1f} s"
    assert "stopping mid-batch" in d.log()
    assert not set(big_ids) & set(read_ids(out / "embeddings", "*.parquet"))
    # the restart reads the batch again; a 2 s budget keeps it short (rows still iterating are flagged)
    env["STREAMEMBED_MODEL__MAX_BATCH_SECONDS"] = "2"
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()
        wait_for(lambda: len(read_ids(out / "embeddings", "*.parquet")) == 6 + 4096, 60, "the big batch", d)
        assert d.terminate() == 0
    finally:
        d.close()
    ids = Counter(read_ids(out / "embeddings", "*.parquet"))
    assert max(ids.values()) == 1 and set(big_ids) <= set(ids)
    t = pq.read_table(out / "embeddings")
    flags = Counter(f for fl in flag_names_of(t) for f in fl)
    assert flags["not_converged"] > 0  # the budget stopped rows that were still iterating


@pytest.mark.slow
def test_a_batch_that_keeps_killing_the_daemon_is_quarantined(tmp_path: Path) -> None:
    """CrashGuard, for real: the daemon is killed (-9) three times while one batch is in flight; the fourth start
    sets that batch aside as `quarantined` dead letters and the stream goes on."""
    model = tmp_path / "slow.npz"
    L = _slow_model(model)
    indir, out = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    big_ids = [f"q{i}" for i in range(4096)]
    write_parquet(indir / "a-heavy.parquet", _slow_rows(L, big_ids, seed=3))
    env = directory_env(indir, out, model, STREAMEMBED_MODEL__METHOD="l1", STREAMEMBED_SOURCE__BATCH_ROWS="4096",
                        STREAMEMBED_MODEL__MAX_BATCH_SECONDS="120", STREAMEMBED_RUN__MAX_BATCH_ATTEMPTS="3")
    for attempt in range(3):
        t0 = time.time_ns()
        d = Daemon(tmp_path, env)
        try:
            wait_for(lambda t0=t0: (_in_flight(out, t0) or "").startswith("files-a-heavy"), 30, f"attempt {attempt}", d)
            d.kill9()
        finally:
            d.close()
    after = indir / "b-after.jsonl"
    write_jsonl(after, [{"id": "after", "dissimilarities": cdist(np.zeros((1, 5)), L)[0].tolist()}])
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()
        wait_for(lambda: "after" in read_ids(out / "embeddings", "*.parquet"), 30, "the file after it", d)
        wait_for(lambda: d.metric("streamembed_quarantined_batches_total") == 1, 10, "the quarantine", d)
        assert d.terminate() == 0
    finally:
        d.close()
    dead = read_dead(out / "dead-letter")
    assert Counter(r["reason"] for r in dead) == {"quarantined": 4096}
    assert {r["id"] for r in dead} == set(big_ids)
    assert "the daemon crashed 3 times while processing this batch" in dead[0]["detail"]
    assert read_ids(out / "embeddings", "*.parquet") == ["after"]


# ----------------------------------------------------------------------------- files written in place


@pytest.mark.slow
def test_jsonl_written_in_place_with_a_pause_loses_nothing(tmp_path: Path) -> None:
    """100 lines, half a line, a pause longer than settle_seconds, then the rest: all 200 embedded
    once."""
    indir, out = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    model = _model(tmp_path)
    d = Daemon(tmp_path, directory_env(indir, out, model, STREAMEMBED_DIRECTORY__SETTLE_SECONDS="0.3",
                                       STREAMEMBED_DIRECTORY__INCOMPLETE_SECONDS="30"))
    try:
        d.wait_port()
        text = b"".join(json.dumps(r).encode() + b"\n" for r in _lines([f"p{i}" for i in range(200)], seed=4))
        cut = text.index(b"\n", len(text) // 2) - 40  # inside a line, near the middle
        complete = text[:cut].count(b"\n")
        with open(indir / "inplace.jsonl", "wb") as f:
            f.write(text[:cut])
            f.flush()
            wait_for(lambda: len(read_ids(out / "embeddings", "*.parquet")) == complete, 20, "the complete lines", d)
            time.sleep(1.5)  # five times settle_seconds: the daemon has looked at the unfinished line again
            f.write(text[cut:])
        wait_for(lambda: len(read_ids(out / "embeddings", "*.parquet")) >= 200, 20, "the rest", d)
        time.sleep(0.5)
        assert Counter(read_ids(out / "embeddings", "*.parquet")) == Counter(f"p{i}" for i in range(200))
        assert read_dead(out / "dead-letter") == []
        assert d.terminate() == 0
    finally:
        d.close()


@pytest.mark.slow
def test_parquet_written_in_place_slowly_is_read_once_complete(tmp_path: Path) -> None:
    """A Parquet file written in five pieces with pauses is read once, complete, and never
    dead-lettered."""
    indir, out = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    model = _model(tmp_path)
    ids = [f"s{i}" for i in range(3000)]
    tmp = tmp_path / "whole.parquet"
    pq.write_table(input_table(ids, dissimilarities(objects(3000, seed=5))), tmp, row_group_size=500)
    data = tmp.read_bytes()
    d = Daemon(tmp_path, directory_env(indir, out, model, STREAMEMBED_DIRECTORY__SETTLE_SECONDS="0.3",
                                       STREAMEMBED_DIRECTORY__INCOMPLETE_SECONDS="30"))
    try:
        d.wait_port()
        with open(indir / "slow.parquet", "wb") as f:
            for k in range(5):
                f.write(data[k * len(data) // 5:(k + 1) * len(data) // 5])
                f.flush()
                time.sleep(0.8)
        wait_for(lambda: len(read_ids(out / "embeddings", "*.parquet")) >= 3000, 20, "the whole file", d)
        time.sleep(0.5)
        assert Counter(read_ids(out / "embeddings", "*.parquet")) == Counter(ids)
        assert read_dead(out / "dead-letter") == []
        assert d.metric("streamembed_files_reread_total") == 0
        assert d.terminate() == 0
    finally:
        d.close()


# ----------------------------------------------------------------------------- permissions (as nobody)


def _nobody_env(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """(workdir, input dir, output root, model) owned by nobody where they must be written."""
    os.chmod(tmp_path, 0o755)
    work, indir, out = tmp_path / "work", tmp_path / "in", tmp_path / "out"
    for p in (work, indir, out):
        p.mkdir()
        os.chown(p, *unprivileged.NOBODY)
    model = _model(tmp_path)
    os.chmod(model, 0o644)
    return work, indir, out, model


@pytest.mark.slow
def test_a_mode_000_file_is_retried_not_dead_lettered_as_nobody(tmp_path: Path) -> None:
    """A file nobody may not read is retried with backoff (read_retries), never dead-lettered,
    while later files are read; once readable it is read."""
    _need_root()
    work, indir, out, model = _nobody_env(tmp_path)
    locked = indir / "a-locked.jsonl"
    write_jsonl(locked, _lines([f"l{i}" for i in range(5)], seed=6))
    os.chown(locked, *unprivileged.NOBODY)
    os.chmod(locked, 0o000)
    with unprivileged.Nobody([tmp_path, SOURCE_ROOT]) as nb:
        d = Daemon(work, directory_env(indir, out, model), wrap=nb.wrap)
        try:
            d.wait_port()
            assert Path(f"/proc/{d.proc.pid}/status").read_text().count(f"Uid:\t{unprivileged.NOBODY[0]}") == 1
            write_jsonl(indir / "b-open.jsonl", _lines(["o0", "o1"], seed=7))
            wait_for(lambda: set(read_ids(out / "embeddings", "*.parquet")) == {"o0", "o1"}, 20, "the open file", d)
            wait_for(lambda: d.metric("streamembed_read_retries_total", 'reason="EACCES"') >= 2, 20, "retries", d)
            assert read_dead(out / "dead-letter") == []
            assert d.get("/healthz")[0] == 200 and not d.dead()
            os.chmod(locked, 0o644)
            wait_for(lambda: {f"l{i}" for i in range(5)} <= set(read_ids(out / "embeddings", "*.parquet")), 20,
                     "the unlocked file", d)
            assert read_dead(out / "dead-letter") == []
            assert d.terminate() == 0
        finally:
            d.close()


def test_a_mode_000_file_shows_in_readiness(tmp_path: Path) -> None:
    _need_root()
    work, indir, out, model = _nobody_env(tmp_path)
    locked = indir / "a-locked.jsonl"
    write_jsonl(locked, _lines(["l0"], seed=6))
    os.chmod(locked, 0o000)
    with unprivileged.Nobody([tmp_path, SOURCE_ROOT]) as nb:
        d = Daemon(work, directory_env(indir, out, model), wrap=nb.wrap)
        try:
            d.wait_port()
            wait_for(lambda: d.metric("streamembed_read_retries_total", 'reason="EACCES"') >= 1, 20, "a retry", d)
            # readiness follows at the loop's next beat
            wait_for(lambda: d.get("/readyz")[0] == 503, 10, "unready", d)
            code, body = d.get("/readyz")
            assert code == 503 and "a-locked.jsonl" in body and "Permission denied" in body
            assert d.get("/healthz")[0] == 200
        finally:
            d.close()


def test_an_unreadable_watched_directory_makes_the_daemon_unready_not_dead(tmp_path: Path) -> None:
    """The watched directory made unreadable: /readyz 503 naming it, /healthz 200, no exit;
    readable again: ready, and its files are read."""
    _need_root()
    work, indir, out, model = _nobody_env(tmp_path)
    with unprivileged.Nobody([tmp_path, SOURCE_ROOT]) as nb:
        d = Daemon(work, directory_env(indir, out, model), wrap=nb.wrap)
        try:
            d.wait_port()
            wait_for(lambda: d.get("/readyz")[0] == 200, 20, "ready", d)
            os.chmod(indir, 0o000)
            write_jsonl(indir / "a.jsonl", _lines(["u0", "u1"], seed=8))
            wait_for(lambda: d.get("/readyz")[0] == 503, 20, "unready", d)
            code, body = d.get("/readyz")
            assert "cannot list input directory" in json.loads(body)["problems"]["source"]
            time.sleep(1.0)
            assert d.get("/healthz")[0] == 200 and not d.dead()
            assert d.metric("streamembed_read_retries_total", 'reason="EACCES"') >= 1
            os.chmod(indir, 0o755)
            wait_for(lambda: d.get("/readyz")[0] == 200, 20, "ready again", d)
            wait_for(lambda: set(read_ids(out / "embeddings", "*.parquet")) == {"u0", "u1"}, 20, "its files", d)
            assert read_dead(out / "dead-letter") == []
            assert d.terminate() == 0
        finally:
            os.chmod(indir, 0o755)
            d.close()


# ----------------------------------------------------------------------------- corrupt state: exit 2, and how out


def _refuse(tmp_path: Path, env: dict[str, str]) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-m", "streamembed", "run"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, env=child_env({**env, "STREAMEMBED_METRICS__ENABLED": "false",
                                                  "STREAMEMBED_LOGGING__FORMAT": "text"}))
    return r.returncode, r.stdout + r.stderr


def _lineage(model: Path) -> str:
    from streamembed.model_io import load_model

    return load_model(model).lineage


def _checkpoint(lineage: str, files: object) -> str:
    return json.dumps({"schema_version": 2, "model": {"lineage": lineage, "version": 1}, "sources": {"files": files}})


CHECKPOINTS = {
    "not_json": lambda lin: "{",
    "empty_file": lambda lin: "",
    "a_list": lambda lin: "[]",
    "schema_99": lambda lin: json.dumps({"schema_version": 99, "sources": {}}),
    "sources_a_number": lambda lin: json.dumps({"schema_version": 2, "sources": 5}),
    "model_wrong_types": lambda lin: json.dumps({"schema_version": 2, "model": {"lineage": 5, "version": "1"},
                                                 "sources": {}}),
    "done_5": lambda lin: _checkpoint(lin, {"done": 5, "current": None}),
    "done_values_not_objects": lambda lin: _checkpoint(lin, {"done": {"a.jsonl": 5}, "current": None}),
    "current_without_row": lambda lin: _checkpoint(lin, {"done": {}, "current": {"file": "a.jsonl"}}),
    "current_negative_row": lambda lin: _checkpoint(lin, {"done": {}, "current": {"file": "a.jsonl", "row": -3}}),
    "current_row_true": lambda lin: _checkpoint(lin, {"done": {}, "current": {"file": "a.jsonl", "row": True}}),
    "position_a_string": lambda lin: _checkpoint(lin, "everything"),
}


@pytest.mark.parametrize("shape", sorted(CHECKPOINTS))
def test_a_corrupt_checkpoint_is_refused_with_exit_2_naming_the_file_and_the_way_out(shape: str,
                                                                                      tmp_path: Path) -> None:
    """Never a restart loop (exit 1) on bad state: exit 2, the file named, `mv ... .bad` suggested."""
    model = _model(tmp_path)
    indir, out = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    write_jsonl(indir / "a.jsonl", _lines(["c0"], seed=9))
    out.mkdir()
    ckpt = out / "checkpoint.json"
    ckpt.write_text(CHECKPOINTS[shape](_lineage(model)))
    code, log = _refuse(tmp_path, directory_env(indir, out, model))
    assert code == 2, log
    assert "refusing to start" in log and str(ckpt) in log and f"mv {ckpt} {ckpt}.bad" in log, log
    assert "Traceback" not in log


def test_a_checkpoint_with_wrong_types_inside_done_is_refused(tmp_path: Path) -> None:
    model = _model(tmp_path)
    indir, out = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    write_jsonl(indir / "a.jsonl", _lines(["c0", "c1"], seed=9))
    out.mkdir()
    ckpt = out / "checkpoint.json"
    ckpt.write_text(_checkpoint(_lineage(model), {"done": {"a.jsonl": {"sig": [1, 2, 3], "rows": "x"}},
                                                  "current": None}))
    env = directory_env(indir, out, model, STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE="true")
    code, log = _refuse(tmp_path, env)
    assert code == 2 and str(ckpt) in log, (code, log[-2000:])


def test_a_corrupt_crash_record_is_refused_with_exit_2(tmp_path: Path) -> None:
    model = _model(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "crash-guard.json").write_text('{"current": 5}')
    code, log = _refuse(tmp_path, directory_env(tmp_path / "in", out, model))
    assert code == 2 and str(out / "crash-guard.json") in log and "delete it" in log, log


def _edit_meta(src: Path, dst: Path, edit: object, rehash: bool) -> None:
    """Copy a model file with its metadata edited (``edit(meta)``), its checksum recomputed if ``rehash``."""
    from streamembed import model_io

    with np.load(src, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(str(arrays.pop("meta")))
    edit(meta)  # type: ignore[operator]
    if rehash:
        meta["checksum_sha256"] = model_io._checksum(arrays, meta)
    with open(dst, "wb") as f:
        np.savez(f, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)


MODELS = {
    "bogus_param": (lambda m: m["params"].update(bogus=1), False, "fails its checksum"),
    "n_landmarks_removed": (lambda m: m.pop("n_landmarks"), False, "fails its checksum"),
    "n_landmarks_removed_rehashed": (lambda m: m.pop("n_landmarks"), True, "lacks 'n_landmarks'"),
    "version_text_rehashed": (lambda m: m.update(model_version="two"), True, "model_version"),
    "fit_params_unknown_rehashed": (lambda m: m["fit_params"].update(bogus=1), True, "fit_params must have"),
}


@pytest.mark.parametrize("case", sorted(MODELS) + ["npy", "text", "truncated", "directory"])
def test_an_edited_or_wrong_model_file_is_refused_with_exit_2(case: str, tmp_path: Path) -> None:
    """Model metadata is covered by the checksum; a re-hashed edit is still validated; .npy, text,
    truncated files and directories are refused with a message naming the file (exit 2, never a restart loop)."""
    good = _model(tmp_path)
    bad = tmp_path / "bad.npz"
    if case in MODELS:
        edit, rehash, words = MODELS[case]
        _edit_meta(good, bad, edit, rehash)
    elif case == "npy":
        with open(bad, "wb") as f:
            np.save(f, np.eye(3))
        words = ".npy"
    elif case == "text":
        bad.write_text("model = cmds\n")
        words = "not a streamembed model"
    elif case == "truncated":
        data = good.read_bytes()
        bad.write_bytes(data[: len(data) // 2])
        words = "not a readable .npz archive"
        with pytest.raises(zipfile.BadZipFile):
            zipfile.ZipFile(bad)
    else:
        bad.mkdir()
        words = "is a directory"
    code, log = _refuse(tmp_path, directory_env(tmp_path / "in", tmp_path / "out", bad))
    assert code == 2, log
    assert "refusing to start" in log and str(bad) in log and words in log, log
    assert "Traceback" not in log


# ----------------------------------------------------------------------------- a full disk (a real tmpfs)


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 2 MiB tmpfs at tmp_path/disk (unmounted afterwards, even on failure)."""
    _need_root()
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "streamembed-test-disk", str(disk)],
                   check=True, timeout=30)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False, timeout=30)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            for _ in range(1000):  # 64 MiB at most: the disk is 2 MiB
                f.write(b"\0" * 65536)
        except OSError:
            pass
    with pytest.raises(OSError):
        (disk / "probe").write_bytes(b"\0" * 4096)
    return filler


def test_a_full_disk_exits_3_at_start_and_mid_run_and_resumes_without_loss(tmp_path: Path, small_disk: Path) -> None:
    """A full disk is 'the world is temporarily wrong': exit 3 (restart), not 2 (refused), at start
    and while running; after space is freed the daemon resumes and nothing is lost."""
    model = _model(tmp_path)
    indir, out = tmp_path / "in", small_disk / "out"
    indir.mkdir()
    write_jsonl(indir / "a.jsonl", _lines([f"a{i}" for i in range(50)], seed=10))
    filler = _fill(small_disk)
    env = directory_env(indir, out, model)
    code, log = _refuse(tmp_path, env)
    assert code == 3, log
    assert "No space left on device" in log and "to be retried" in log, log
    assert f"'{small_disk}/" in log, log  # the message names the file it could not write
    filler.unlink()
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()
        wait_for(lambda: len(read_ids(out / "embeddings", "*.parquet")) == 50, 20, "the first file", d)
        filler = _fill(small_disk)
        write_jsonl(indir / "b.jsonl", _lines([f"b{i}" for i in range(50)], seed=11))
        rc = d.wait(30)
    finally:
        d.close()
    assert rc == 3, d.log()
    assert "the environment failed under the loop" in d.log()
    failed = [line for line in d.log().splitlines() if "the environment failed under the loop" in line]
    assert f"{small_disk}/" in failed[0], failed
    filler.unlink()
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()
        wait_for(lambda: len(read_ids(out / "embeddings", "*.parquet")) >= 100, 20, "the second file", d)
        assert d.terminate() == 0
    finally:
        d.close()
    assert Counter(read_ids(out / "embeddings", "*.parquet")) == Counter([f"a{i}" for i in range(50)]
                                                                         + [f"b{i}" for i in range(50)])
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_a_port_taken_or_brokers_unreachable_exit_3(tmp_path: Path) -> None:
    """The other 'world is temporarily wrong' cases are exit 3 too (a supervisor restarts)."""
    import socket

    model = _model(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        env = directory_env(tmp_path / "in", tmp_path / "out", model)
        r = subprocess.run([sys.executable, "-m", "streamembed", "run"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60, env=child_env({**env, "STREAMEMBED_METRICS__PORT": str(port)}))
    assert r.returncode == 3, r.stderr
    assert "another process has the port" in r.stderr
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    env = {"STREAMEMBED_SOURCE__KIND": "kafka", "STREAMEMBED_MODEL__PATH": str(model),
           "STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{dead_port}", "STREAMEMBED_KAFKA__INPUT_TOPIC": "t",
           "STREAMEMBED_KAFKA__STARTUP_TIMEOUT_SECONDS": "3", "STREAMEMBED_OUTPUT__ROOT": str(tmp_path / "out2")}
    t0 = time.monotonic()
    code, log = _refuse(tmp_path, env)
    assert code == 3, log
    assert "to be retried" in log
    # D11: kafka-python's own bootstrap wait (30 s) used to outlast startup_timeout_seconds
    assert time.monotonic() - t0 < 20


# ----------------------------------------------------------------------------- refits and the pid file


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, cmdline) of the live (not zombie) children of ``pid``."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
            fields = stat[stat.rfind(")") + 2:].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append((int(p.name), (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def test_kill_9_during_a_refit_leaves_no_worker_and_the_restart_cleans_its_directory(tmp_path: Path) -> None:
    """The refit worker dies with its daemon (PR_SET_PDEATHSIG) before finishing, and the next
    start removes the refit-* work directory."""
    model = tmp_path / "model.npz"
    fitted_model(features=True).save(model)
    indir, out = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    X = objects(1500, seed=12)
    write_parquet(indir / "a.parquet", pa.table({"id": pa.array([f"f{i}" for i in range(1500)]),
                                                 "features": list_column(X)}))
    env = directory_env(indir, out, model, STREAMEMBED_REFIT__AUTO="false", STREAMEMBED_DRIFT__ENABLED="true")
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()
        wait_for(lambda: d.metric("streamembed_records_in_total") == 1500, 30, "the features", d)
        wait_for(lambda: d.metric("streamembed_refit_candidates") > 0, 20, "refit candidates", d)
        cli = subprocess.run([sys.executable, "-m", "streamembed", "refit"], cwd=tmp_path, env=d.env,
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        workers: list[tuple[int, str]] = []

        def worker_started() -> bool:
            workers[:] = [c for c in _children(d.proc.pid) if "refit_worker" in c[1]]
            return bool(workers)

        wait_for(worker_started, 20, "the refit worker", d)
        d.kill9()
    finally:
        d.close()
    worker = workers[0][0]
    end = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < end:
        time.sleep(0.05)
    assert not _alive(worker), "the refit worker outlived its daemon"
    left = list((out / "models").glob("refit-*"))
    assert len(left) == 1 and not (left[0] / "record.json").exists() and not (left[0] / "new.npz").exists()
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()
        wait_for(lambda: d.get("/readyz")[0] == 200, 20, "ready", d)
        assert list((out / "models").glob("refit-*")) == []
        assert "removed 1 leftover refit work directories" in d.log()
        assert d.terminate() == 0
    finally:
        d.close()


def _start_time(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2:].split()[19])


@pytest.mark.parametrize("start", ["stale", "exact"])
def test_refit_with_a_stale_pid_file_never_signals_a_stranger(start: str, tmp_path: Path) -> None:
    """The pid file of a killed daemon names a pid that now belongs to another process (a `sleep`
    of ours): `streamembed refit` refuses (exit 2) and the stranger lives on. 'exact' even gives the stranger's
    own start time: the lock nobody holds still tells the file is stale."""
    model = _model(tmp_path)
    indir, out = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    env = directory_env(indir, out, model)
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()
        wait_for(lambda: d.get("/readyz")[0] == 200, 20, "ready (the pid file is written before)", d)
        pid_text = (out / "streamembed.pid").read_text().split()
        assert int(pid_text[0]) == d.proc.pid
        d.kill9()
    finally:
        d.close()
    assert (out / "streamembed.pid").exists()  # left behind by the kill
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        stamp = _start_time(stranger.pid) if start == "exact" else int(pid_text[1])
        (out / "streamembed.pid").write_text(f"{stranger.pid} {stamp}\n")
        cli = subprocess.run([sys.executable, "-m", "streamembed", "refit"], cwd=tmp_path, env=child_env(env),
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 2, cli.stderr
        assert "no running daemon" in cli.stderr and "stale" in cli.stderr
        time.sleep(0.2)
        assert stranger.poll() is None, "the stranger was signalled"
    finally:
        stranger.kill()
        stranger.wait(10)


# ----------------------------------------------------------------------------- what a supervisor sees


def test_metrics_name_the_model_file_not_its_path(tmp_path: Path) -> None:
    """The model is named in the metrics by its file name only, never by its path (which may say too much)."""
    deep = tmp_path / "some" / "secret" / "place"
    deep.mkdir(parents=True)
    model = deep / "my-model.npz"
    fitted_model().save(model)
    d = Daemon(tmp_path, directory_env(tmp_path / "in", tmp_path / "out", model))
    try:
        d.wait_port()
        wait_for(lambda: "streamembed_model_info{" in d.get("/metrics")[1], 20, "the model info", d)
        _, text = d.get("/metrics")
        assert re.search(r'^streamembed_model_info\{.*source="my-model.npz".*\} 1\.0$', text, flags=re.M), text
        assert str(tmp_path) not in text and "secret" not in text
        assert d.terminate() == 0
    finally:
        d.close()


def test_exit_codes_match_the_shipped_systemd_unit() -> None:
    """0 ok, 1 bug (restart), 2 refused (do not restart), 3 environment (restart): as the unit says."""
    from streamembed.daemon import errors

    assert (errors.EXIT_OK, errors.EXIT_FAILED, errors.EXIT_REFUSED, errors.EXIT_UNAVAILABLE) == (0, 1, 2, 3)
    unit = (SOURCE_ROOT / "deploy" / "systemd" / "streamembed.service").read_text()
    keys: dict[str, list[str]] = {}
    for line in unit.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            keys.setdefault(k, []).append(v)
    assert keys["Restart"] == ["on-failure"]  # restarts on every non-zero exit ...
    assert keys["RestartPreventExitStatus"] == ["2"]  # ... but 2
    assert "RestartForceExitStatus" not in keys
    for success in keys.get("SuccessExitStatus", []):
        assert not {"1", "3"} & set(success.split())
    # the table in daemon/errors.py says the same
    table = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (\d) \| [^|]+\| ([^|]+)\|$", errors.__doc__ or "",
                                                              flags=re.M)}
    assert set(table) == {0, 1, 2, 3}
    assert "not restart" in table[0] and "not restart" in table[2]
    assert table[1].strip().startswith("restart") and table[3].strip().startswith("restart")
    assert signal.SIGTERM.name in unit and "TimeoutStopSec" in unit


# ----------------------------------------------------------------------------- a file that changes after it was read


@pytest.mark.parametrize("rewrite", ["new_rows", "garbage"])
def test_a_file_rewritten_after_it_was_read_loses_nothing_else(rewrite: str, tmp_path: Path) -> None:
    """Two files read in one roll (one output file); the first is rewritten: the second's rows must survive."""
    model = _model(tmp_path)
    indir, out = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    write_parquet(indir / "a.parquet", input_table([f"a{i}" for i in range(20)], dissimilarities(objects(20, 13))))
    write_parquet(indir / "b.parquet", input_table([f"b{i}" for i in range(20)], dissimilarities(objects(20, 14))))
    old = time.time() - 60
    os.utime(indir / "a.parquet", (old, old))
    os.utime(indir / "b.parquet", (old + 1, old + 1))
    d = Daemon(tmp_path, directory_env(indir, out, model, STREAMEMBED_OUTPUT__ROLL_SECONDS="60",
                                       STREAMEMBED_OUTPUT__DEAD_LETTER_FORMAT="jsonl"))
    try:
        d.wait_port()
        wait_for(lambda: len(read_ids(out / "embeddings", "*.parquet")) == 40, 20, "both files", d)
        parts = sorted(p.name for p in (out / "embeddings").glob("part-*.parquet"))
        assert len(parts) == 1 and parts[0].startswith("part-files-a.parquet"), parts  # one roll, named after a
        if rewrite == "new_rows":
            write_parquet(indir / "a.parquet", input_table([f"a2-{i}" for i in range(5)],
                                                           dissimilarities(objects(5, 15))))
        else:
            (indir / "a.parquet").write_bytes(b"no longer parquet")
        wait_for(lambda: d.metric("streamembed_files_reread_total") == 1 and d.metric(
            "streamembed_checkpoints_total") >= 2 and d.metric("streamembed_records_in_total") >= 41, 20,
            "the re-read", d)
        time.sleep(1.0)
        assert d.terminate() == 0
    finally:
        d.close()
    ids = set(read_ids(out / "embeddings", "*.parquet"))
    assert {f"b{i}" for i in range(20)} <= ids, sorted(ids)[:5]
