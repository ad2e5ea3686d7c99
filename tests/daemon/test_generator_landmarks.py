"""The daemon's own generator fit chooses its landmarks with ``select_landmarks`` (``model.landmark_selection``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamembed.core.refit.landmarks import LANDMARK_SELECTIONS, select_landmarks
from streamembed.daemon.model_setup import load_or_fit_model
from streamembed.config import ConfigError, load_config
from streamembed.daemon.errors import StartupError
from streamembed.stream.sources.generator import GaussianMixtureStream


def _config(tmp_path: Path, **extra: object):
    overrides = {"output.root": str(tmp_path), "metrics.enabled": False, "model.n_landmarks": 30,
                 "model.fit_sample": 300, **extra}
    return load_config(None, environ={}, overrides=overrides)


@pytest.mark.parametrize("selection", ["rpcholesky", "maxmin"])
def test_the_generator_fit_keeps_the_landmarks_select_landmarks_chooses(selection: str, tmp_path: Path) -> None:
    cfg = _config(tmp_path, **{"model.landmark_selection": selection})
    model = load_or_fit_model(cfg)
    X = GaussianMixtureStream(cfg.generator).fit_sample(300)
    idx = select_landmarks(selection, 30, X=X, seed=cfg.generator.seed, n_components=cfg.model.n_components)
    np.testing.assert_array_equal(model.features, X[idx])


def test_the_default_is_the_measured_one_and_bad_values_are_refused(tmp_path: Path) -> None:
    assert load_config(None, environ={}).model.landmark_selection == "max-variance" == LANDMARK_SELECTIONS[0]
    with pytest.raises(ConfigError, match="landmark_selection"):
        _config(tmp_path, **{"model.landmark_selection": "best"})
    with pytest.raises(ConfigError, match="must be <= model.fit_sample"):
        _config(tmp_path, **{"model.n_landmarks": 400})
    with pytest.raises(StartupError, match="cannot fit a model from the generator .*metric"):
        load_or_fit_model(_config(tmp_path, **{"model.metric": "no-such-metric"}))
