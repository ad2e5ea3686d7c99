"""What a map explains of its fit population (docs/math.md §4.9)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance as ssd

from streamembed import LandmarkMDS
from streamembed.core.monitor.explained import WARN_BELOW, explained, warning_text


def test_a_map_of_a_plane_explains_everything_and_warns_of_nothing():
    rng = np.random.default_rng(0)
    X = np.zeros((300, 4))
    X[:, :2] = rng.normal(size=(300, 2)) * [3, 1]
    e = explained(LandmarkMDS(n_components=2, n_landmarks=50).fit(ssd.squareform(ssd.pdist(X))).model_)
    assert e.of == "fit objects" and e.share == pytest.approx(1.0, abs=1e-9) and abs(e.median_unexplained) < 1e-9
    assert warning_text(e) is None and "explains 100%" in e.line()


def test_a_map_of_many_equal_dimensions_says_how_little_it_shows_and_what_to_try():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 40))
    model = LandmarkMDS(n_components=2).fit(ssd.squareform(ssd.pdist(X))).model_  # every object a landmark
    e = explained(model)
    assert e.of == "landmarks" and e.share < WARN_BELOW and e.half_dimension is not None and e.half_dimension > 5
    top = model.spectrum.eigenvalues[:2].sum() / (model.spectrum.row_means - model.spectrum.grand_mean / 2).sum()
    assert e.share == pytest.approx(top, rel=1e-9)
    why = warning_text(e)
    assert why is not None and f"consider d = {e.half_dimension}" in why and "positions show a small part" in why
