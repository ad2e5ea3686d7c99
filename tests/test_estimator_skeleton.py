"""``LandmarkMDS(landmark_selection="skeleton")``: the LSDR skeleton as landmarks and the MDS of its geodesics as the
map (docs/math.md §8.4–8.5), its parameters from the option table, and its refusals."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.errors import InputError
from streamembed.core.fit.skeleton import fit_skeleton, lsdr_embedding
from streamembed.core.options import DEFAULTS


def _sphere(n: int = 200, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 3))
    return Z / np.linalg.norm(Z, axis=1, keepdims=True) * (1.0 + 0.05 * rng.normal(size=(n, 1)))


def test_the_skeleton_is_the_landmark_set_and_the_geodesic_mds_is_the_map() -> None:
    X = _sphere()
    est = LandmarkMDS(2, landmark_selection="skeleton", metric="euclidean").fit(X)
    lsdr = lsdr_embedding(X, 2)
    assert est.landmark_indices_.tolist() == lsdr.skeleton.indices.tolist()
    assert est.landmark_ids_.tolist() == [str(i) for i in lsdr.skeleton.indices]
    assert np.array_equal(est.embedding_, lsdr.Y[lsdr.skeleton.indices])
    assert np.array_equal(est.landmark_features_, X[lsdr.skeleton.indices])
    assert est.skeleton_ is not None and est.skeleton_.size == est.n_landmarks_
    assert est.transform(X[:5]).shape == (5, 2)  # arrivals: projected by Euclidean distances to the skeleton


def test_alpha_and_k_are_estimator_parameters_with_the_tables_defaults() -> None:
    est = LandmarkMDS()
    assert (est.skeleton_alpha, est.skeleton_neighbors) == (DEFAULTS["skeleton_alpha"], DEFAULTS["skeleton_neighbors"])
    assert (DEFAULTS["skeleton_alpha"], DEFAULTS["skeleton_neighbors"]) == (0.95, 3)
    X = _sphere(150, 1)
    loose = LandmarkMDS(2, landmark_selection="skeleton", metric="euclidean", skeleton_alpha=0.5,
                        skeleton_neighbors=6).fit(X)
    sk = fit_skeleton(X, 0.5, 6)
    assert loose.landmark_indices_.tolist() == sk.indices.tolist()
    assert loose.skeleton_.graph.n_removed > fit_skeleton(X).graph.n_removed  # a lower level removes more
    assert "skeleton_alpha" in loose.get_params() and loose.set_params(skeleton_alpha=0.9).skeleton_alpha == 0.9


def test_another_selection_has_no_skeleton_and_a_refit_forgets_it() -> None:
    X = _sphere(100)
    est = LandmarkMDS(2, landmark_selection="skeleton", metric="euclidean").fit(X)
    assert est.skeleton_ is not None
    est.set_params(landmark_selection="maxmin", n_landmarks=20).fit(X)
    assert est.skeleton_ is None and est.n_landmarks_ == 20


def test_a_saved_skeleton_model_loads_with_its_parameters(tmp_path) -> None:
    X = _sphere(120)
    est = LandmarkMDS(2, landmark_selection="skeleton", metric="euclidean", skeleton_neighbors=4).fit(X)
    est.save(tmp_path / "m.npz")
    back = LandmarkMDS.load(tmp_path / "m.npz")
    assert back.landmark_selection == "skeleton" and back.skeleton_neighbors == 4
    assert np.allclose(back.transform(X[:7]), est.transform(X[:7]))


@pytest.mark.parametrize(("params", "X", "match"), [
    ({}, np.zeros((5, 5)), "finds the skeleton of feature vectors: set metric='euclidean'"),
    ({"metric": "cityblock"}, _sphere(30), "needs the Euclidean metric"),
    ({"metric": "euclidean", "n_landmarks": 10}, _sphere(30), "cannot take n_landmarks=10"),
    ({"metric": "rbf", "input": "similarity"}, _sphere(30), "cannot take input='similarity'"),
    ({"metric": "euclidean", "geodesic_neighbors": 5}, _sphere(30), "cannot take geodesic_neighbors=5"),
    ({"metric": "euclidean", "skeleton_alpha": 1.5}, _sphere(30), r"skeleton_alpha must be a number in \[0, 1\]"),
    ({"metric": "euclidean", "skeleton_neighbors": 0}, _sphere(30), "skeleton_neighbors must be a positive integer"),
    ({"metric": "euclidean"}, np.random.default_rng(0).normal(size=(40, 7)), "p = 7 features, at most 6"),
    ({"metric": "euclidean"}, np.vstack([_sphere(30), _sphere(30)[:1]]), "rows 0 and 30 are the same point"),
    ({"metric": "euclidean"}, np.c_[np.arange(20.0), np.arange(20.0) * 2], "collinear or coplanar"),
    ({"metric": "euclidean", "n_components": 3}, np.vstack([np.c_[np.cos(t), np.sin(t)] for t in
                                                            [2 * np.pi * np.arange(12) / 12]] + [np.zeros((1, 2))]),
     "skeleton of the 13 points has 1 point"),
])
def test_what_lsdr_cannot_fit_is_refused_with_the_reason(params: dict, X: np.ndarray, match: str) -> None:
    with pytest.raises(InputError, match=match):
        LandmarkMDS(landmark_selection="skeleton", **params).fit(X)
