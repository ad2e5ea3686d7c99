"""Plots produce readable PNG files (skipped without matplotlib)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from streamembed import LandmarkMDS  # noqa: E402
from streamembed.evaluation import plots  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    L = rng.normal(size=(30, 3))
    Z = rng.normal(size=(200, 3))
    D = np.sqrt(((L[:, None] - L[None]) ** 2).sum(-1))
    A = np.sqrt(((Z[:, None] - L[None]) ** 2).sum(-1))
    est = LandmarkMDS(2).fit(D)
    return est, est.embed(A)


def is_png(path) -> bool:
    return path.exists() and path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 5000


def test_map_coloured_by_relative_residual(tmp_path, fitted) -> None:
    est, res = fitted
    out = plots.plot_map(est, res.y, res.relative_unexplained, tmp_path / "map.png", color_label="relative unexplained")
    assert is_png(out)


def test_map_coloured_by_model_version(tmp_path, fitted) -> None:
    est, res = fitted
    versions = np.repeat([1, 2], [120, 80])
    assert is_png(plots.plot_map(est, res.y, versions, tmp_path / "v.png", color_label="model version"))
    assert is_png(plots.plot_map(est, res.y, None, tmp_path / "plain.png"))


def test_map_rejects_wrong_dimension(tmp_path, fitted) -> None:
    est, res = fitted
    with pytest.raises(ValueError):
        plots.plot_map(est, res.y[:, :1], None, tmp_path / "bad.png")


def test_drift_with_timestamps_refits_and_thresholds(tmp_path) -> None:
    records = [
        {"time": f"2026-01-01T00:{i:02d}:00Z", "trace_k0": float(i % 7), "gap_ratio": 0.1 * (i % 7),
         "model_version": 1 + i // 7, "refit": i % 7 == 0 and i > 0}
        for i in range(20)
    ]
    out = plots.plot_drift(records, tmp_path / "drift.png", thresholds={"gap_ratio": 0.5})
    assert is_png(out)


def test_plot_cli_drift_and_map(tmp_path, fitted) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rec = tmp_path / "records.jsonl"
    rec.write_text("\n".join(json.dumps({"time": t, "trace_k0": t * 0.5, "refit": t == 5}) for t in range(10)))
    assert plots.main(["drift", str(rec), "-o", str(tmp_path / "d.png"), "--threshold", "trace_k0=3"]) == 0
    assert is_png(tmp_path / "d.png")

    est, res = fitted
    model = tmp_path / "model.npz"
    est.save(model)
    table = pa.table({
        "y": pa.FixedSizeListArray.from_arrays(pa.array(res.y.ravel()), 2),
        "beta": res.beta, "unexplained": res.unexplained, "model_version": np.ones(len(res), dtype=np.int64),
    })
    pq.write_table(table, tmp_path / "emb.parquet")
    assert plots.main(["map", "-m", str(model), "-e", str(tmp_path / "emb.parquet"), "-o", str(tmp_path / "m.png")]) == 0
    assert is_png(tmp_path / "m.png")
    assert plots.main(["drift", str(tmp_path / "missing.jsonl")]) == 2
