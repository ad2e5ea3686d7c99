"""``LandmarkMDS(n_landmarks=n, landmark_selection=...)``: fit on all N objects, keep n of them (docs/landmarks.md)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance as ssd

from streamembed import LandmarkMDS
from streamembed.core.errors import InputError
from streamembed.core.refit.landmarks import select_landmarks


@pytest.fixture
def data():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 4)) * np.array([4.0, 2.0, 1.0, 0.5])
    return X, ssd.squareform(ssd.pdist(X))


def test_fit_keeps_the_landmarks_select_landmarks_chooses_with_the_same_seed(data):
    X, D = data
    est = LandmarkMDS(n_components=2, n_landmarks=30, landmark_selection="rpcholesky", random_state=7).fit(D)
    expected = select_landmarks("rpcholesky", 30, D=D, seed=7, n_components=2)
    assert np.array_equal(est.landmark_indices_, expected)
    assert est.n_landmarks_ == 30 and est.n_features_in_ == 150
    assert est.landmark_ids_.tolist() == [str(i) for i in expected]
    ref = LandmarkMDS(n_components=2).fit(D[np.ix_(expected, expected)])
    np.testing.assert_allclose(est.embedding_, ref.embedding_, atol=1e-9)
    # rows to all N objects, or to the n landmarks only: the same placements
    np.testing.assert_allclose(est.transform(D[:5]), est.transform(D[:5, expected]), atol=1e-9)
    feats = LandmarkMDS(n_components=2, n_landmarks=30, landmark_selection="rpcholesky", random_state=7).fit_features(X)
    assert np.array_equal(feats.landmark_indices_, expected)


def test_the_default_selection_and_named_objects(data):
    _, D = data
    names = [f"obj{i}" for i in range(150)]
    est = LandmarkMDS(n_landmarks=20, random_state=0).fit(D, landmark_ids=names)
    assert est.get_params()["landmark_selection"] == "max-variance"
    assert est.landmark_ids_.tolist() == [names[i] for i in est.landmark_indices_]
    every = LandmarkMDS().fit(D[:40, :40])
    assert every.landmark_indices_ is None and every.n_features_in_ == 40


def test_bad_parameters_are_refused(data):
    _, D = data
    with pytest.raises(InputError, match="landmark_selection must be one of"):
        LandmarkMDS(n_landmarks=20, landmark_selection="best").fit(D)
    with pytest.raises(InputError, match="n_landmarks must be None or an integer"):
        LandmarkMDS(n_landmarks=1).fit(D)
    with pytest.raises(InputError, match="all 10 objects are identical"):
        LandmarkMDS(n_landmarks=5).fit(np.zeros((10, 10)))
