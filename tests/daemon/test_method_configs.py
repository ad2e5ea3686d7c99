"""Each option's example config in config/ runs through the real daemon (docs/methods.md).

Every file is a small override of the embedded default; run in-process with
a few small batches, no ops server, output under tmp_path.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest

from streamembed.daemon.app import run_daemon
from streamembed.daemon.model_setup import load_or_fit_model
from streamembed.daemon.errors import StartupError
from streamembed.config import ConfigError, load_config
from streamembed.stream.output import y_matrix

ROOT = Path(__file__).resolve().parents[2]

#: config file -> (method written on every output row, what the fitted model must show)
CONFIGS = {
    "restricted": ("restricted", lambda m: m.pipeline.identity and m.landmark_map is None),
    "similarity": ("restricted", lambda m: m.input_kind == "similarity" and m.input_width == m.n_landmarks + 1),
    "stress": ("stress", lambda m: m.landmark_map is None and m.pipeline.identity),
    "l1": ("l1", lambda m: m.landmark_map is None and m.pipeline.identity),
    "isomap": ("projection", lambda m: m.pipeline.geodesic is not None),
    "cailliez": ("projection", lambda m: m.pipeline.constant.constant > 0 and m.negative_share < 1e-9),
    "smacof": ("stress", lambda m: m.landmark_map is not None and m.fit_params["landmark_map"] == "smacof"),
    "sammon": ("stress", lambda m: m.landmark_map is not None and m.fit_params["landmark_map"] == "sammon"),
    "nonmetric": ("stress", lambda m: m.map_transform is not None and m.fit_params["landmark_map"] == "nonmetric"),
    "kernel": ("kernel", lambda m: m.bandwidth is not None and m.kernel_bandwidth is None),
}


def _config(name: str, root: Path, **extra: object):
    overrides = {"output.root": str(root), "metrics.enabled": False, "run.max_batches": 2,
                 "source.batch_rows": 256, "generator.rate": 0.0, "model.n_landmarks": 60, **extra}
    return load_config(ROOT / "config" / f"{name}.toml", environ={}, overrides=overrides)


def test_every_example_config_is_tested() -> None:
    examples = {p.stem for p in (ROOT / "config").glob("*.toml")} - {"default"}
    assert examples == set(CONFIGS)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_runs_through_the_daemon_with_its_method(name: str, tmp_path: Path) -> None:
    method, shows = CONFIGS[name]
    cfg = _config(name, tmp_path)
    assert shows(load_or_fit_model(cfg)), f"config/{name}.toml does not exercise its option"
    assert run_daemon(cfg) == 0
    table = ds.dataset(tmp_path / "embeddings").to_table()
    assert table.num_rows == 512
    assert set(table.column("method").to_pylist()) == {method}
    y = y_matrix(table)
    assert y.shape == (512, 2) and np.isfinite(y).all()
    assert not (tmp_path / "dead-letter").exists() or not any((tmp_path / "dead-letter").rglob("*.parquet"))


def test_similarity_rows_from_the_generator_as_direct_input(tmp_path: Path) -> None:
    # generator.emit = dissimilarities sends the model's input rows: n similarities + k(z, z)
    cfg = _config("similarity", tmp_path, **{"generator.emit": "dissimilarities"})
    assert run_daemon(cfg) == 0
    assert ds.dataset(tmp_path / "embeddings").to_table().num_rows == 512


def test_refined_map_with_a_kernel_method_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="model.landmark_map = 'smacof' needs model.method"):
        load_config(ROOT / "config" / "smacof.toml", environ={}, overrides={"model.method": "projection"})
    cfg = _config("smacof", tmp_path, **{"model.save_path": str(tmp_path / "m.npz")})
    load_or_fit_model(cfg)
    loaded = load_config(None, environ={}, overrides={"model.path": str(tmp_path / "m.npz"),
                                                      "model.method": "restricted"})
    with pytest.raises(StartupError, match="classical-MDS map"):
        load_or_fit_model(loaded)


def test_model_kernel_bandwidth_replaces_the_sigma_of_a_fitted_or_loaded_model(tmp_path: Path) -> None:
    fitted = load_or_fit_model(_config("kernel", tmp_path, **{"model.kernel_bandwidth": 2.5,
                                                               "model.save_path": str(tmp_path / "m.npz")}))
    assert fitted.bandwidth == 2.5 == fitted.kernel_bandwidth
    rule = load_or_fit_model(_config("kernel", tmp_path / "rule", **{"model.save_path": str(tmp_path / "r.npz")}))
    loaded = load_or_fit_model(load_config(ROOT / "config" / "kernel.toml", environ={}, overrides={
        "model.path": str(tmp_path / "r.npz"), "model.kernel_bandwidth": 0.75}))
    assert loaded.bandwidth == 0.75 and rule.bandwidth not in (None, 0.75)
    with pytest.raises(ConfigError, match="model.kernel_bandwidth"):
        load_config(None, environ={}, overrides={"model.kernel_bandwidth": -1.0})


def test_the_kernel_method_on_a_model_without_sigma_refuses_to_start(tmp_path: Path) -> None:
    from scipy.spatial.distance import cdist

    from streamembed import LandmarkMDS

    P = np.repeat(np.random.default_rng(0).normal(size=(10, 3)), 2, axis=0)  # every landmark doubled: σ = 0
    LandmarkMDS().fit(cdist(P, P)).save(tmp_path / "m.npz")
    cfg = load_config(None, environ={}, overrides={"model.path": str(tmp_path / "m.npz"), "model.method": "kernel"})
    with pytest.raises(StartupError, match="needs the map's bandwidth sigma"):
        load_or_fit_model(cfg)
