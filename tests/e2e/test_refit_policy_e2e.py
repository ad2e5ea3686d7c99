"""Refits through the real daemon in batch mode, default drift and refit settings (docs/refits.md).

A feature-mode model of scikit-learn's digits 0–4 (100 uniform random landmarks, ``streamembed fit``); a
directory of Parquet files: 24,000 resampled digits 0–4 (each with a little pixel noise), then, in the
drifting run, 4,000 resampled digits 5–9. The daemon runs with ``directory.exit_when_idle = true``: the
drifting run must end with a refitted model that places the real digits 5–9 with 5-NN accuracy ≥ 0.65
(the map of 0–4 gives about 0.5), the stationary run with the map unchanged; both exit 0 and say the
refit's outcome in the log.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import scipy.spatial.distance as ssd

from streamembed.model_io import load_model
from tests.stream.helpers import list_column, write_parquet

from .cli import cli, log_records
from .daemon import Daemon, directory_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

sklearn_datasets = pytest.importorskip("sklearn.datasets")


def _knn_accuracy(Y: np.ndarray, labels: np.ndarray, k: int = 5) -> float:
    D = ssd.squareform(ssd.pdist(Y))
    np.fill_diagonal(D, np.inf)
    votes = labels[np.argpartition(D, k, axis=1)[:, :k]]
    return float((np.array([np.bincount(v).argmax() for v in votes]) == labels).mean())


def _files(directory: Path, X: np.ndarray, rng: np.random.Generator, count: int, prefix: str,
           per_file: int = 4000) -> None:
    rows = X[rng.integers(0, len(X), size=count)] + rng.normal(scale=0.5, size=(count, X.shape[1]))
    for k, start in enumerate(range(0, count, per_file)):
        part = rows[start:start + per_file]
        ids = [f"{prefix}-{start + i}" for i in range(len(part))]
        table = pa.table({"id": pa.array(ids, pa.string()), "features": list_column(part.astype(np.float64), True)})
        write_parquet(directory / f"{prefix}-{k:02d}.parquet", table)


@pytest.fixture(scope="module")
def digits_model(tmp_path_factory) -> tuple[Path, np.ndarray, np.ndarray]:
    dg = sklearn_datasets.load_digits()
    X, y = dg.data.astype(np.float64), dg.target
    root = tmp_path_factory.mktemp("digits")
    np.save(root / "X04.npy", X[y < 5])
    r = cli("fit", "--features", "X04.npy", "--landmarks", "100", "--selection", "random", "--seed", "3",
            "-o", "model.npz", cwd=root)
    assert r.returncode == 0, r.stderr
    return root / "model.npz", X, y


def _run(tmp_path: Path, model: Path, X: np.ndarray, y: np.ndarray, drift: bool) -> tuple[int, str, Path]:
    incoming, out = tmp_path / "incoming", tmp_path / "out"
    incoming.mkdir()
    rng = np.random.default_rng(7)
    _files(incoming, X[y < 5], rng, 24_000, "a-old")
    if drift:
        _files(incoming, X[y >= 5], rng, 4_000, "b-new")
    env = directory_env(incoming, out, model, STREAMEMBED_SOURCE__BATCH_ROWS="1024",
                        STREAMEMBED_DIRECTORY__INCOMPLETE_SECONDS="30")
    d = Daemon(tmp_path, env, ("--set", "directory.exit_when_idle=true"))
    try:
        code = d.wait(150)
    finally:
        d.close()
    return code, d.log(), out


def test_a_drifting_stream_ends_with_a_repaired_map(tmp_path, digits_model) -> None:
    model, X, y = digits_model
    code, log, out = _run(tmp_path, model, X, y, drift=True)
    assert code == 0, log
    msgs = [r["msg"] for r in log_records(log)]
    assert any(m.startswith("refit installed: ") for m in msgs), log
    assert any(m.startswith("input exhausted: ") for m in msgs), log
    new = load_model(out / "models" / "model-v2.npz")
    old = load_model(model)
    new_digits = X[y >= 5]
    acc_old = _knn_accuracy(old.place(old.dissimilarities_to_landmarks(new_digits)).y, y[y >= 5])
    acc_new = _knn_accuracy(new.place(new.dissimilarities_to_landmarks(new_digits)).y, y[y >= 5])
    assert acc_new >= 0.65 and acc_new > acc_old + 0.1, (acc_old, acc_new)


def test_a_stationary_stream_keeps_the_map(tmp_path, digits_model) -> None:
    model, X, y = digits_model
    code, log, out = _run(tmp_path, model, X, y, drift=False)
    assert code == 0, log
    msgs = [r["msg"] for r in log_records(log)]
    assert not any(m.startswith("refit installed") for m in msgs), log
    assert any(m.startswith("input exhausted: ") for m in msgs), log  # the outcome, whatever it was, is said
    assert not list((out / "models").glob("model-v*.npz"))
