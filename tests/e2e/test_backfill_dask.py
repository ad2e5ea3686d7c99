"""Backfills on a real ``distributed.LocalCluster`` (2 worker processes on loopback): every input row exactly once.

The workers import this checkout: PYTHONPATH is set to it before the cluster
starts (the nanny's worker processes inherit the environment).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.stream.helpers import dissimilarities, fitted_model, input_table, objects, write_arrow, write_jsonl, \
    write_parquet

distributed = pytest.importorskip("distributed")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        c = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                     host="127.0.0.1")
        try:
            yield c
        finally:
            c.close()


def _ids(out: Path) -> tuple[list[str], list[str]]:
    embedded = [i for p in sorted(out.glob("part-*.parquet")) if p.is_file()
                for i in pq.read_table(p).column("id").to_pylist()]
    dead = [i for p in sorted((out / "dead-letter").glob("dead-*.parquet"))
            for i in pq.read_table(p).column("id").to_pylist()]
    return embedded, dead


def test_every_input_id_is_in_the_output_exactly_once_and_a_rerun_rewrites_the_same_parts(
        tmp_path: Path, cluster) -> None:
    from streamembed.jobs.backfill import backfill

    fitted_model().save(tmp_path / "m.npz")
    inp = tmp_path / "in"
    inp.mkdir()
    A = dissimilarities(objects(900))
    ids = [f"x{i}" for i in range(900)]
    write_parquet(inp / "a.parquet", input_table(ids[:400], A[:400]), row_group_size=50)  # split in row groups
    write_arrow(inp / "b.arrows", input_table(ids[400:700], A[400:700]), chunk=64)
    write_arrow(inp / "c.arrow", input_table(ids[700:850], A[700:850]), file_format=True)
    write_jsonl(inp / "d.jsonl",
                [{"id": i, "dissimilarities": a.tolist()} for i, a in zip(ids[850:], A[850:], strict=True)],
                raw_lines=[b'{"id": "short", "dissimilarities": [1.0]}'])
    (inp / "e.arrows").write_bytes(b"not an arrow stream")
    out = tmp_path / "out"
    first = backfill([inp], tmp_path / "m.npz", out, cluster, rows_per_task=150)
    parts = sorted(p.name for p in out.glob("part-*.parquet"))
    again = backfill([inp], tmp_path / "m.npz", out, cluster, rows_per_task=150)
    assert sorted(p.name for p in out.glob("part-*.parquet")) == parts
    for report in (first, again):
        assert not report.failed
        assert report.embedded == 900 and report.dead == 2
    embedded, dead = _ids(out)
    assert sorted(embedded) == sorted(ids)  # exactly once
    assert sorted(dead, key=str) == sorted([None, "short"], key=str)  # the unreadable file, the short row
    assert len(parts) == 3 + 1 + 1 + 1  # a.parquet in 3 tasks of >= 150 rows, b, c, d
    assert not list(out.rglob("*.tmp"))


def test_a_killed_worker_loses_and_duplicates_nothing(tmp_path: Path, cluster) -> None:
    from streamembed.jobs.backfill import backfill

    fitted_model().save(tmp_path / "m.npz")
    inp = tmp_path / "in"
    inp.mkdir()
    ids = []
    for k in range(12):  # 12 tasks of ~0.2 s each (the stress method is slow)
        A = dissimilarities(objects(300, seed=k))
        names = [f"f{k}-{i}" for i in range(300)]
        ids += names
        write_arrow(inp / f"f{k:02d}.arrows", input_table(names, A))
    out = tmp_path / "out"
    client = distributed.Client(cluster)
    try:
        pids = client.run(os.getpid)
        result: dict = {}
        runner = threading.Thread(target=lambda: result.update(
            report=backfill([inp], tmp_path / "m.npz", out, cluster, method="stress")))
        runner.start()
        deadline = time.monotonic() + 60
        while not list(out.glob("part-*.parquet")) and time.monotonic() < deadline:
            time.sleep(0.01)
        published = len(list(out.glob("part-*.parquet")))
        victim = sorted(pids.values())[0]
        os.kill(victim, signal.SIGKILL)  # mid-way: its task in progress is lost with it
        runner.join(timeout=120)
        assert not runner.is_alive()
    finally:
        client.close()
    assert 1 <= published < 12
    report = result["report"]
    assert not report.failed and report.dead == 0
    embedded, dead = _ids(out)
    assert sorted(embedded) == sorted(ids) and not dead  # every id exactly once
    assert len(list(out.glob("part-*.parquet"))) == 12
    assert not list(out.rglob("*.tmp"))  # the killed attempt's temporary file is gone too
    assert victim in pids.values() and len(report.results) == 12


def test_cli_dask_backfill_exits_1_naming_the_failed_task_and_finishes_the_others(tmp_path: Path, cluster) -> None:
    from streamembed.jobs.backfill import Task

    fitted_model().save(tmp_path / "m.npz")
    inp = tmp_path / "in"
    inp.mkdir()
    A = dissimilarities(objects(200))
    write_arrow(inp / "ok.arrows", input_table([f"a{i}" for i in range(100)], A[:100]))
    write_arrow(inp / "blocked.arrows", input_table([f"b{i}" for i in range(100)], A[100:]))
    out = tmp_path / "out"
    # a directory where the task's part must go: publishing it fails, and only that task
    (out / f"part-{Task(str(inp / 'blocked.arrows'), 'blocked.arrows').stem}.parquet").mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-m", "streamembed", "embed", str(inp), "-m", str(tmp_path / "m.npz"),
                        "-o", str(out), "--dask", cluster.scheduler_address, "--progress", "never"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 1, r.stderr
    assert "task failed: blocked.arrows" in r.stderr and "1 failed tasks" in r.stderr
    embedded, _ = _ids(out)
    assert sorted(embedded) == sorted(f"a{i}" for i in range(100))
