"""End to end: the real CLI as a subprocess, fed files, stopped by SIGTERM or killed with -9."""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from streamembed.stream.output import flag_names_of, methods_of

from ..stream.helpers import (dissimilarities, fitted_model, input_table, objects, read_dead, read_ids, write_arrow,
                              write_jsonl, write_parquet)
from .daemon import Daemon, directory_env, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.npz"
    fitted_model().save(path)
    return path


def _mixed_inputs(indir: Path, seed: int = 0) -> tuple[set[str], set[str]]:
    """Parquet + Arrow stream + Arrow file + JSONL + a block; returns (good ids, bad ids)."""
    indir.mkdir(exist_ok=True)
    A = dissimilarities(objects(700, seed=seed + 1))
    A[5, 3] = np.nan  # non_finite
    A[401, 0] = -2.0  # negative
    ids = [f"o{i}" for i in range(700)]
    write_parquet(indir / "a.parquet", input_table(ids[:300], A[:300]), row_group_size=100)
    write_arrow(indir / "b.arrows", input_table(ids[300:450], A[300:450]), chunk=40)
    write_arrow(indir / "c.arrow", input_table(ids[450:600], A[450:600]), file_format=True, chunk=50)
    write_jsonl(indir / "d.jsonl", [{"id": i, "dissimilarities": a.tolist(), "event_time": "2024-05-01T12:00:00Z"}
                                    for i, a in zip(ids[600:], A[600:].astype(float), strict=True)])
    Zb = objects(4, seed=99)
    from scipy.spatial.distance import cdist

    block_ids = [f"blk{i}" for i in range(4)]
    write_parquet(indir / "e-block.parquet", input_table(block_ids, dissimilarities(Zb), cross=cdist(Zb, Zb)))
    bad = {"o5", "o401"}
    return set(ids + block_ids) - bad, bad


def test_mixed_files_sigterm_and_metrics_agree(tmp_path: Path, model: Path) -> None:
    good, bad = _mixed_inputs(tmp_path / "in")
    out = tmp_path / "out"
    d = Daemon(tmp_path, directory_env(tmp_path / "in", out, model))
    try:
        d.wait_port()
        wait_for(lambda: d.get("/readyz")[0] == 200, 20, "readiness", d)
        total = len(good) + len(bad)
        wait_for(lambda: d.metric("streamembed_records_in_total") == total, 30, "all records read", d)
        wait_for(lambda: d.metric("streamembed_checkpoints_total") > 0
                 and len(read_ids(out / "embeddings", "*.parquet")) == len(good), 20, "output published", d)
        out_ids = read_ids(out / "embeddings", "*.parquet")
        dead = read_dead(out / "dead-letter")
        assert Counter(out_ids) == Counter(good)
        assert {r["id"]: r["reason"] for r in dead} == {"o5": "non_finite", "o401": "negative"}
        # the scraped counters agree with the files
        embedded = sum(d.metric("streamembed_records_embedded_total", f'method="{m}"') for m in ("projection", "block"))
        assert embedded == len(out_ids)
        assert d.metric("streamembed_records_embedded_total", 'method="block"') == 4
        assert d.metric("streamembed_dead_letters_total") == len(dead) == 2
        assert d.metric("streamembed_records_failed_total", 'reason="negative"') == 1
        assert d.metric("streamembed_records_failed_total", 'reason="non_finite"') == 1
        assert d.metric("streamembed_relative_unexplained_count") == len(out_ids)
        assert d.metric("streamembed_end_to_end_latency_seconds_count") == len(out_ids)
        assert d.metric("streamembed_model_version") == 1
        assert 'streamembed_model_info{' in d.get("/metrics")[1]
        assert d.get("/healthz")[0] == 200
        assert d.terminate() == 0
    finally:
        d.close()
    table = pq.read_table(out / "embeddings")
    blk = table.filter(pc.equal(methods_of(table), "block"))
    assert sorted(blk.column("id").to_pylist()) == [f"blk{i}" for i in range(4)]
    assert all("block" in f for f in flag_names_of(blk))
    assert '"signal": "SIGTERM"' in d.log()


def test_kill_9_mid_stream_then_restart_loses_nothing(tmp_path: Path, model: Path) -> None:
    indir = tmp_path / "in"
    indir.mkdir()
    all_ids: set[str] = set()
    for f in range(24):
        ids = [f"f{f}-{i}" for i in range(400)]
        A = dissimilarities(objects(400, seed=f + 10))
        write_parquet(indir / f"x{f:02d}.parquet", input_table(ids, A), row_group_size=128)
        all_ids.update(ids)
    out = tmp_path / "out"
    env = directory_env(indir, out, model, STREAMEMBED_SOURCE__BATCH_ROWS="50", STREAMEMBED_OUTPUT__ROLL_ROWS="200",
                        STREAMEMBED_MODEL__METHOD="restricted", STREAMEMBED_MODEL__K0_ROWS="all")
    rng = random.Random()
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()
        wait_for(lambda: (out / "checkpoint.json").exists(), 30, "a first checkpoint", d)
        time.sleep(rng.uniform(0.0, 0.4))
        d.kill9()
    finally:
        d.close()
    partial = len(read_ids(out / "embeddings", "*.parquet"))
    print(f"published at the kill: {partial} of {len(all_ids)}")
    d2 = Daemon(tmp_path, dict(env, STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE="true"))
    try:
        assert d2.wait(60) == 0, d2.log()
    finally:
        d2.close()
    seen = Counter(read_ids(out / "embeddings", "*.parquet") + [r["id"] for r in read_dead(out / "dead-letter")])
    assert set(seen) >= all_ids
    dups = sum(c - 1 for c in seen.values())
    assert dups <= 50, f"{dups} duplicates (one batch is 50 rows); {partial} rows had been published at the kill"
    assert "resuming from checkpoint" in d2.log() or partial == 0


@pytest.mark.slow
def test_run_without_arguments_produces_output_and_metrics(tmp_path: Path) -> None:
    # no command-line arguments: the embedded default (generator, fitted model); the environment only
    # bounds the run and moves the metrics port off 9108
    d = Daemon(tmp_path, {"STREAMEMBED_RUN__MAX_BATCHES": "4"})  # 4 x 8192 rows at 5,000 rows/s: ~7 s
    try:
        t0 = time.monotonic()
        d.wait_port()
        wait_for(lambda: d.metric("streamembed_records_embedded_total", 'method="projection"') > 0, 20,
                 "embedded records", d)
        assert d.get("/healthz")[0] == 200
        assert d.wait(30) == 0
        assert time.monotonic() - t0 < 20
    finally:
        d.close()
    files = list((tmp_path / "streamembed-out" / "embeddings").glob("part-generator-*.parquet"))
    assert files and sum(pq.ParquetFile(f).metadata.num_rows for f in files) == 4 * 8192
