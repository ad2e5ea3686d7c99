"""Roy's tractable consistency index and the evaluate indices block (docs/math.md §8.3), against a direct
implementation: every candidate perturbation built row by row, the pipeline refitted, the residual from
scipy's orthogonal Procrustes plus the best scale, the maximum taken one by one."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from scipy.spatial.distance import cdist

from streamembed.consistency_index import (INDEX_KEYS, consistency_index, evaluate_indices, farthest_point_centres,
                                           landmark_pipeline)
from streamembed.quality import cmds_pipeline
from streamembed.core.errors import InputError
from streamembed.trustability import reconstruction, relative_trustability, trustability_index


def _pca(X: np.ndarray, d: int) -> np.ndarray:
    Xt = X - X.mean(axis=0)
    return Xt @ np.linalg.svd(Xt, full_matrices=False)[2][:d].T


def _residual(A: np.ndarray, B: np.ndarray) -> float:
    """‖Ã − λB̃R‖² with R from scipy.linalg.orthogonal_procrustes and the least-squares λ."""
    At, Bt = A - A.mean(axis=0), B - B.mean(axis=0)
    R = scipy.linalg.orthogonal_procrustes(Bt, At)[0]
    BR = Bt @ R
    lam = float((BR * At).sum() / (BR * BR).sum())
    return float(np.square(At - lam * BR).sum())


def _direct_tci(X: np.ndarray, pipeline, centres: list[int]) -> tuple[float, tuple[int, int], list[float]]:
    n, p = X.shape
    Y = pipeline(X)
    X_hat = reconstruction(X, Y).X_hat
    h = float(np.median([np.linalg.norm(X[a] - X[b]) for a in range(n) for b in range(a + 1, n)]))
    scores, pairs = [], []
    for i in centres:
        for j in range(p):
            Xt = X - X_hat
            for r in range(n):  # T_ij(x̂_r) = exp(−‖x̂_r − x_i‖² / 2h²) e_j
                Xt[r, j] += np.exp(-np.sum((X_hat[r] - X[i]) ** 2) / (2 * h * h))
            scores.append(_residual(pipeline(Xt), Y))
            pairs.append((i, j))
    best = int(np.argmax(scores))
    return scores[best], pairs[best], scores


PIPELINES = {
    "pca": lambda X: _pca(X, 2),
    "cmds": lambda X: cmds_pipeline()(X, 2),
    "landmarks": lambda X: landmark_pipeline(n_landmarks=8, landmark_selection="maxmin")(X, 2),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_the_consistency_index_is_the_maximum_over_every_candidate_recomputed_one_by_one(name: str) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(14, 3)) * [2.0, 1.0, 0.4] + np.c_[np.sin(np.arange(14.0)), np.zeros((14, 2))]
    pipeline = PIPELINES[name]
    value, argmax, scores = _direct_tci(X, pipeline, list(range(14)))
    tci = consistency_index(X, pipeline)
    assert tci.candidates == 14 * 3
    assert tci.value == pytest.approx(value, rel=1e-8)
    assert tci.argmax == argmax
    assert np.allclose(tci.scores, scores, rtol=1e-8, atol=1e-12)


def test_m_centres_give_the_candidates_of_their_farthest_point_objects_and_a_lower_bound() -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20, 3))
    pipeline = PIPELINES["pca"]
    full = consistency_index(X, pipeline)
    part = consistency_index(X, pipeline, centres=4)
    order = farthest_point_centres(X, 4)
    assert part.candidates == 12 and part.centres.tolist() == order.tolist()
    value, argmax, _ = _direct_tci(X, pipeline, order.tolist())
    assert part.value == pytest.approx(value, rel=1e-8) and part.argmax == argmax
    assert part.value <= full.value
    assert consistency_index(X, pipeline, centres=50).value == pytest.approx(full.value, rel=1e-12)


def test_farthest_point_centres_start_nearest_the_centroid_and_break_ties_by_index() -> None:
    """On the line 0, 1, 3, 7, 8 (centroid 3.8): 3, then 8 (25 > 9), then 0 (9 > 4 > 1), then 1 and 7 tie: 1."""
    X = np.array([[0.0], [1.0], [3.0], [7.0], [8.0]])
    assert farthest_point_centres(X, 5).tolist() == [2, 4, 0, 1, 3]
    assert farthest_point_centres(np.array([[-1.0], [1.0], [-2.0], [2.0]]), 2).tolist() == [0, 3]
    with pytest.raises(InputError, match="positive integer"):
        farthest_point_centres(X, 0)


def test_progress_reports_every_block_of_refits_up_to_the_total() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 5))
    calls: list[tuple[int, int]] = []
    consistency_index(X, PIPELINES["pca"], progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (150, 150) and all(t == 150 for _, t in calls)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls) and len(calls) == 3


def test_the_evaluate_block_has_every_key_and_the_direct_values() -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(16, 3)) * [3.0, 1.0, 0.3]
    pipe = cmds_pipeline()
    block = evaluate_indices(X, pipe, 2, centres=5)
    assert tuple(block) == INDEX_KEYS
    n = X.shape[0]
    assert block["trustability"] == pytest.approx(trustability_index(X, pipe(X, 3)) / n, abs=1e-12)
    assert block["trustability"] < 1e-12  # classical MDS at d = p (Theorem 8)
    Y = pipe(X, 2)
    assert block["trustability_d"] == pytest.approx(trustability_index(X, Y) / n, rel=1e-12)
    assert block["relative_trustability"] == pytest.approx(relative_trustability(X, Y), rel=1e-12)
    value, argmax, _ = _direct_tci(X, lambda Z: pipe(Z, 2), farthest_point_centres(X, 5).tolist())
    assert block["consistency"] == pytest.approx(value / n, rel=1e-8)
    assert block["consistency_argmax"] == list(argmax) and block["consistency_candidates"] == 15
    import json

    json.dumps(block)  # JSON-ready: plain ints, floats and lists


def test_the_block_reports_none_at_d_equal_p_when_the_pipeline_cannot_make_p_coordinates() -> None:
    X = np.random.default_rng(5).normal(size=(12, 4))
    block = evaluate_indices(X, landmark_pipeline(n_landmarks=4), 2, centres=2)  # 4 landmarks: at most 3 axes
    assert block["trustability"] is None and block["consistency_candidates"] == 8


def test_a_pipeline_that_fails_on_a_candidate_is_named() -> None:
    X = np.random.default_rng(6).normal(size=(10, 2))
    calls = []

    def flaky(Z: np.ndarray) -> np.ndarray:
        calls.append(1)
        if len(calls) == 4:
            raise InputError("no map")
        return _pca(Z, 1)

    with pytest.raises(InputError, match=r"candidate \(object \d+, coordinate \d\): no map"):
        consistency_index(X, flaky)
    with pytest.raises(InputError, match=r"returned shape \(10, 2\) for candidate"):
        consistency_index(X, lambda Z: _pca(Z, 2), Y=_pca(X, 1))  # the refits give 2 columns, Y has 1


@pytest.mark.parametrize(("X", "match"), [
    (np.ones((2, 2)) * [[1.0], [2.0]], "at least 3 objects"),
    (np.c_[np.arange(6.0), np.full(6, 2.0)], r"constant column\(s\) \[1\]"),
    (np.c_[np.arange(6.0), [0, 1, np.nan, 3, 4, 5]], "is not finite"),
])
def test_bad_input_is_refused_naming_the_problem(X: np.ndarray, match: str) -> None:
    with pytest.raises(InputError, match=match):
        consistency_index(X, lambda Z: Z[:, :1])
    with pytest.raises(InputError, match=match):
        evaluate_indices(X, lambda Z, d: Z[:, :d], 1)


def test_an_output_wider_than_the_input_is_refused() -> None:
    X = np.random.default_rng(7).normal(size=(8, 2))
    with pytest.raises(InputError, match="d = 3 columns, more than the p = 2"):
        consistency_index(X, lambda Z: np.c_[Z, Z[:, :1] ** 2])
    with pytest.raises(InputError, match="n_components must be between 1 and the p = 2"):
        evaluate_indices(X, lambda Z, d: Z[:, :d], 3)


def test_the_cmds_pipeline_is_the_full_classical_mds_of_the_features() -> None:
    X = np.random.default_rng(8).normal(size=(20, 3))
    Y = cmds_pipeline()(X, 2)
    assert np.allclose(cdist(Y, Y), cdist(_pca(X, 2), _pca(X, 2)), atol=1e-10)


@pytest.mark.parametrize("selection", ["max-variance", "random", "rpcholesky", "kmeans++", "kmedoids", "maxmin"])
def test_the_landmark_pipeline_is_the_estimators_map_without_its_radius(selection: str) -> None:
    """Every row of X placed on the map ``LandmarkMDS(**params).fit(X)`` makes, bit for bit (the pipeline skips
    only the radius calibration, which no index reads)."""
    from streamembed import LandmarkMDS

    X = np.random.default_rng(5).normal(size=(60, 4)) * [3.0, 2.0, 1.0, 0.5]
    for method in ("projection", "restricted"):
        params = {"n_landmarks": 12, "landmark_selection": selection, "method": method, "random_state": 3}
        want = LandmarkMDS(n_components=2, metric="euclidean", **params).fit(X).transform(X)
        np.testing.assert_array_equal(landmark_pipeline(**params)(X, 2), want)
