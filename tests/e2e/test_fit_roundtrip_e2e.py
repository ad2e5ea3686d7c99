"""With the real CLI: `fit` from a bare ``.npy`` keeps which rows are the landmarks.

The round trip a user makes with their own data: fit on D.npy, read the landmark ids (row numbers of D)
in model order, build input rows from D in that order, `embed` them, and find every landmark on its own
coordinate of the map (docs/math.md §3: a landmark's own row projects exactly onto its coordinate).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS
from streamembed.stream.output import y_matrix

from .cli import cli, rows_table

pytestmark = pytest.mark.e2e

N, LANDMARKS = 150, 40


def test_fit_from_npy_then_embed_puts_each_landmark_on_its_own_coordinate(tmp_path: Path) -> None:
    """Landmark ids are D's row numbers in model order (written, printed and shown by `model info`); rows
    built in that order embed every landmark onto its model coordinate to 1e-8, and every other row onto
    the model's own transform; rows built in another order do not (the order is what matters)."""
    X = np.random.default_rng(4).standard_normal((N, 3)) * [4.0, 2.0, 1.0]
    D = cdist(X, X)
    np.save(tmp_path / "D.npy", D)
    r = cli("fit", "--dissimilarities", "D.npy", "--landmarks", LANDMARKS, "--landmarks-out", "ids.txt",
            "-o", "m.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ids = (tmp_path / "ids.txt").read_text().split()
    rows = [int(x) for x in ids]
    assert len(rows) == LANDMARKS == len(set(rows)) and all(0 <= x < N for x in rows)
    # (select_landmarks returns them sorted; the model order is whatever --landmarks-out says: rows in
    # another order, e.g. reversed below, put every landmark elsewhere)
    assert "row numbers of the input): " + ", ".join(ids[:12]) in r.stderr

    info = cli("model", "info", "m.npz", "--json", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    doc = json.loads(info.stdout)
    assert doc["landmark_ids"] == ids and doc["landmarks"] == LANDMARKS and doc["version"] == 1
    est = LandmarkMDS.load(tmp_path / "m.npz")
    assert doc["lineage"] == est.lineage_
    # the ids really are D's rows: the model's landmark dissimilarities are D restricted to them, in order
    np.testing.assert_allclose(est.model_.dissimilarities, D[np.ix_(rows, rows)], rtol=0, atol=1e-12)

    names = [f"r{i}" for i in range(N)]
    pq.write_table(rows_table(names, D[:, rows]), tmp_path / "in.parquet")
    e = cli("embed", "in.parquet", "-m", "m.npz", "-o", "out.parquet", cwd=tmp_path)
    assert e.returncode == 0, e.stderr
    out = pq.read_table(tmp_path / "out.parquet")
    Y = dict(zip(out.column("id").to_pylist(), y_matrix(out), strict=True))
    assert set(Y) == set(names) and set(out.column("model_version").to_pylist()) == {1}
    own = np.vstack([Y[f"r{r}"] for r in rows])
    np.testing.assert_allclose(own, est.embedding_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(np.vstack([Y[n] for n in names]), est.transform(D[:, rows]), rtol=0, atol=1e-8)

    # the same rows built in another order miss: the landmarks land elsewhere
    pq.write_table(rows_table(names, D[:, rows[::-1]]), tmp_path / "in-reversed.parquet")
    wrong = cli("embed", "in-reversed.parquet", "-m", "m.npz", "-o", "reversed.parquet", cwd=tmp_path)
    assert wrong.returncode == 0, wrong.stderr
    ts = pq.read_table(tmp_path / "reversed.parquet")
    Ys = dict(zip(ts.column("id").to_pylist(), y_matrix(ts), strict=True))
    assert np.abs(np.vstack([Ys[f"r{r}"] for r in rows]) - est.embedding_).max() > 0.1
