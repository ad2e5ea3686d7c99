"""``streamembed embed``, in process: one file out, dead letters, refusals with exit code 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy.spatial.distance import cdist

from streamembed.cli import main
from streamembed.stream.output import y_matrix

from ..stream.helpers import dissimilarities, fitted_model, input_table, landmark_points, objects, write_jsonl


def test_embed_one_file_with_dead_letters(tmp_path: Path) -> None:
    est = fitted_model()
    est.save(tmp_path / "m.npz")
    A = dissimilarities(objects(50))
    A[7, 2] = -3.0
    pq.write_table(input_table([f"o{i}" for i in range(50)], A), tmp_path / "in.parquet")
    rc = main(["embed", str(tmp_path / "in.parquet"), "-m", str(tmp_path / "m.npz"), "-o",
               str(tmp_path / "out.parquet"), "--batch-rows", "16", "--k0-rows", "all", "--method", "restricted"])
    assert rc == 1  # done, with a dead letter
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.num_rows == 49 and "o7" not in out.column("id").to_pylist()
    assert set(out.column("method").to_pylist()) == {"restricted"}
    assert out.column("k0").null_count == 0
    np.testing.assert_allclose(y_matrix(out),
                               est.embed(np.delete(A, 7, axis=0), method="restricted").y, rtol=1e-5, atol=1e-6)
    dead = pq.read_table(tmp_path / "out.dead-letter").to_pylist()
    assert [(d["id"], d["reason"], d["row"]) for d in dead] == [("o7", "negative", 7)]


def test_embed_jsonl_in_feature_mode(tmp_path: Path) -> None:
    est = fitted_model(features=True)
    est.save(tmp_path / "m.npz")
    Z = objects(5)
    write_jsonl(tmp_path / "in.jsonl", [{"id": f"z{i}", "features": z.tolist()} for i, z in enumerate(Z)])
    assert main(["embed", str(tmp_path / "in.jsonl"), "-m", str(tmp_path / "m.npz"), "-o",
                 str(tmp_path / "o.parquet"), "--progress", "always"]) == 0
    y = y_matrix(pq.read_table(tmp_path / "o.parquet"))
    np.testing.assert_allclose(y, est.transform(cdist(Z, landmark_points())), rtol=1e-9)


def test_embed_refuses_a_corrupt_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.npz").write_bytes(b"PK\x03\x04 not really")
    pq.write_table(input_table(["a"], np.ones((1, 12), np.float32)), tmp_path / "in.parquet")
    assert main(["embed", str(tmp_path / "in.parquet"), "-m", str(tmp_path / "m.npz"), "-o",
                 str(tmp_path / "o.parquet")]) == 2
    assert "cannot load model" in capsys.readouterr().err


def test_embed_defaults_to_the_method_the_model_was_fitted_for(tmp_path: Path) -> None:
    """`fit --method restricted` stores the method with the model; `embed` without --method uses it, and an
    explicit --method still wins."""
    X = landmark_points()
    np.save(tmp_path / "D.npy", cdist(X, X))
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--n-components", "2", "--method", "restricted",
                 "-o", str(tmp_path / "m.npz")]) == 0
    A = cdist(X[:10] + 0.01, X)
    pq.write_table(input_table([f"o{i}" for i in range(10)], A), tmp_path / "in.parquet")
    for extra, expect in (([], "restricted"), (["--method", "projection"], "projection")):
        out = tmp_path / f"out-{expect}.parquet"
        assert main(["embed", str(tmp_path / "in.parquet"), "-m", str(tmp_path / "m.npz"), "-o", str(out), *extra]) == 0
        assert set(pq.read_table(out).column("method").to_pylist()) == {expect}
