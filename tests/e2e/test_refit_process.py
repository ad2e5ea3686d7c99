"""End to end: a manual refit of the running daemon, then inputs that name old and new landmark versions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.spatial.distance import cdist

from ..stream.helpers import fitted_model, input_table, landmark_points, objects, read_dead, write_parquet
from .daemon import Daemon, directory_env, wait_for

pytestmark = pytest.mark.e2e


def _with_version(table: pa.Table, version: int) -> pa.Table:
    return table.append_column("landmark_version", pa.array(np.full(table.num_rows, version, dtype=np.int64)))


def test_manual_refit_then_old_new_and_unknown_landmark_versions(tmp_path: Path) -> None:
    model_path = tmp_path / "model.npz"
    fitted_model().save(model_path)
    L = landmark_points()
    indir, out = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    env = directory_env(indir, out, model_path, STREAMEMBED_REFIT__AUTO="false")
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()
        # a block: its members' mutual dissimilarities make them landmark candidates
        Zb = objects(40, seed=5) + 4.0
        write_parquet(indir / "a-block.parquet",
                      input_table([f"b{i}" for i in range(40)], cdist(Zb, L).astype(np.float32), cross=cdist(Zb, Zb)))
        wait_for(lambda: d.metric("streamembed_refit_candidates") == 40, 20, "the block in the reservoir", d)
        cli = subprocess.run([sys.executable, "-m", "streamembed", "refit"], cwd=tmp_path, env=d_env(env),
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        wait_for(lambda: d.metric("streamembed_refits_total", 'trigger="manual"') == 1, 60, "the manual refit", d)
        assert d.metric("streamembed_model_version") == 2
        history = [json.loads(x) for x in (out / "model-history.jsonl").read_text().splitlines()]
        rec = history[-1]
        assert rec["status"] == "installed" and rec["trigger"] == "manual" and rec["model_version"] == 2
        new_ids = rec["new_landmarks"]
        pool = {str(i): L[i] for i in range(len(L))} | {f"b{i}": Zb[i] for i in range(40)}  # default ids: row numbers
        L2 = np.vstack([pool[i] for i in new_ids])

        Z = objects(30, seed=8)
        old = _with_version(input_table([f"old{i}" for i in range(10)], cdist(Z[:10], L).astype(np.float32)), 1)
        new = _with_version(input_table([f"new{i}" for i in range(10)], cdist(Z[10:20], L2).astype(np.float32)), 2)
        cur = input_table([f"cur{i}" for i in range(5)], cdist(Z[20:25], L2).astype(np.float32))  # no version: current
        unknown = _with_version(input_table([f"unk{i}" for i in range(5)], cdist(Z[25:], L).astype(np.float32)), 7)
        write_parquet(indir / "b-versions.parquet", pa.concat_tables([old, new, _with_version(cur, 2), unknown]))
        wait_for(lambda: d.metric("streamembed_records_in_total") >= 40 + 30, 20, "the versioned file", d)
        assert d.terminate() == 0
    finally:
        d.close()

    table = pq.read_table(out / "embeddings").to_pydict() if (out / "embeddings").is_dir() else {}
    rows = {i: (v, f, y)
            for i, v, f, y in zip(table["id"], table["model_version"], table["flags"], table["y"], strict=True)}
    for i in range(10):
        version, flags, _ = rows[f"old{i}"]
        assert version == 1 and "retained_model" in flags
        version, flags, _ = rows[f"new{i}"]
        assert version == 2 and "retained_model" not in flags
    # the same object embedded by the retained and the current model lands in the same frame
    Zs = Z[:10]
    e1 = fitted_model()
    y_old = np.array([rows[f"old{i}"][2] for i in range(10)])
    np.testing.assert_allclose(y_old, e1.transform(cdist(Zs, L)), atol=1e-4)
    dead = {r["id"]: r for r in read_dead(out / "dead-letter")}
    assert {f"unk{i}" for i in range(5)} <= set(dead)
    assert all(dead[f"unk{i}"]["reason"] == "unknown_landmark_version" for i in range(5))


def d_env(env: dict[str, str]) -> dict[str, str]:
    from .cli import clean_env

    return clean_env(env)
