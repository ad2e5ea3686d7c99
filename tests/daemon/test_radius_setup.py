"""The daemon's radius: a generator-fitted model is calibrated, ``trust.coverage`` is stated with a loaded model,
and a coverage outside (0, 1) refuses to start (docs/math.md §9)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS
from streamembed.config import ConfigError, load_config
from streamembed.daemon.model_setup import GENERATOR_CALIBRATION_OBJECTS, load_or_fit_model


def _config(tmp_path: Path, **extra: object):
    overrides = {"output.root": str(tmp_path), "metrics.enabled": False, "model.n_landmarks": 30,
                 "model.fit_sample": 300, **extra}
    return load_config(None, environ={}, overrides=overrides)


def test_a_generator_fitted_model_is_calibrated_on_the_sample_objects_that_are_not_landmarks(tmp_path: Path) -> None:
    model = load_or_fit_model(_config(tmp_path, **{"trust.coverage": 0.8}))
    cal = model.radius_calibration
    assert cal is not None and cal.coverage == 0.8
    assert cal.info["fit_objects"] == 270 and cal.info["objects"] == min(270, GENERATOR_CALIBRATION_OBJECTS)


@pytest.mark.parametrize("bad", ["0", "1", "1.5", "-0.2"])
def test_a_coverage_outside_0_1_refuses_to_start(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match="trust.coverage"):
        _config(tmp_path, **{"trust.coverage": bad})


def test_a_loaded_model_states_the_configured_coverage(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    est = LandmarkMDS(n_landmarks=50).fit(cdist(X, X))
    est.save(tmp_path / "m.npz")
    model = load_or_fit_model(_config(tmp_path, **{"model.path": str(tmp_path / "m.npz"), "trust.coverage": 0.5}))
    assert model.radius_calibration is not None and model.radius_calibration.coverage == 0.5
    A = cdist(rng.standard_normal((10, 4)), X[est.landmark_indices_])
    assert (model.place(A).radius < est.model_.place(A).radius).all()  # a lower coverage, a smaller radius
    # a coverage the stored calibration cannot state: no radius, one WARNING saying how many objects are missing
    with caplog.at_level(logging.WARNING, logger="streamembed"):
        tight = load_or_fit_model(_config(tmp_path, **{"model.path": str(tmp_path / "m.npz"),
                                                       "trust.coverage": 0.999}))
    assert np.isnan(tight.place(A).radius).all()
    assert any("needs" in r.getMessage() and "more" in r.getMessage() for r in caplog.records)
