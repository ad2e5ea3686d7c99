"""The daemon's start-up says what is wrong and what it runs: batch mode on a directory that does not
exist refuses (exit 2, naming the path) instead of exiting 0 having read nothing; a feature-mode model is
logged as "feature input"."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.daemon.app import run_daemon
from streamembed.config import load_config
from streamembed.daemon.errors import EXIT_OK, EXIT_REFUSED
from streamembed.ops.metrics import Metrics

from ..stream.helpers import fitted_model


def _cfg(tmp_path: Path, model: Path, **more: object):
    return load_config(None, environ={}, overrides={
        "model.path": str(model), "output.root": str(tmp_path / "out"), "metrics.enabled": False,
        "source.kind": "directory", "directory.path": str(tmp_path / "incomming"), "drift.enabled": False, **more})


def test_batch_mode_on_a_missing_directory_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    fitted_model().save(tmp_path / "model.npz")
    cfg = _cfg(tmp_path, tmp_path / "model.npz", **{"directory.exit_when_idle": True})
    assert run_daemon(cfg, metrics=Metrics()) == EXIT_REFUSED
    refused = [line for line in capsys.readouterr().err.splitlines() if "refusing to start" in line]
    assert refused and str(tmp_path / "incomming") in refused[0] and "does not exist" in refused[0], refused
    assert not (tmp_path / "out").exists()  # refused before anything was written
    (tmp_path / "incomming").write_text("a file, not a directory")
    assert run_daemon(cfg, metrics=Metrics()) == EXIT_REFUSED
    assert "is not a directory" in capsys.readouterr().err
    (tmp_path / "incomming").unlink()
    (tmp_path / "incomming").mkdir()
    assert run_daemon(cfg, metrics=Metrics()) == EXIT_OK  # an empty directory is a batch of nothing


def test_a_feature_mode_model_is_logged_as_feature_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    X = np.random.default_rng(0).normal(size=(40, 5))
    LandmarkMDS(n_components=2).fit_features(X, metric="cityblock").save(tmp_path / "features.npz")
    (tmp_path / "incomming").mkdir()
    cfg = _cfg(tmp_path, tmp_path / "features.npz", **{"directory.exit_when_idle": True})
    assert run_daemon(cfg, metrics=Metrics()) == EXIT_OK
    (line,) = [line for line in capsys.readouterr().err.splitlines() if " model: " in line]
    assert "feature input (p = 5, cityblock metric; dissimilarity rows also accepted)" in line, line
