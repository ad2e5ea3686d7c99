"""Ordinal (non-metric) landmark maps: Kruskal's stress-1 with monotone regression (``core.fit.ordinal_map``).

References: scikit-learn's ``smacof(metric=False)`` from the same start (its iteration, its tie rule),
scikit-learn's ``IsotonicRegression`` for the disparities, strictly increasing transforms of the input
(the map may depend on the order only), and multi-start brute force for the placements of arrivals.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS
from streamembed.core.place.criteria.solve import solve_stress
from streamembed.core.place.criteria.stress import stress_objective
from streamembed.core.errors import InputError, ModelFileError
from streamembed.core.flags import FLAG_NOT_CONVERGED
from streamembed.core.fit.metric_map import LANDMARK_MAPS, MAP_RTOL, map_stress, refine_map
from streamembed.core.fit.ordinal_map import (
    MonotoneTransform,
    OrdinalProblem,
    kruskal_stress1,
    rank_start,
)

#: Strictly increasing transforms with g(0) = 0 (a dissimilarity matrix keeps its zero diagonal).
INCREASING = {"expm1": np.expm1, "cube": lambda x: x**3, "log1p": np.log1p, "sqrt": np.sqrt}


def _points(seed: int, n: int = 30, m: int = 40, p: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    L, Z = rng.normal(size=(n, p)), rng.normal(size=(m, p))
    return cdist(L, L), cdist(Z, L)


def _similar(X: np.ndarray, Y: np.ndarray) -> float:
    """Residual of the best similarity transform (rotation, shift, scale) of X onto Y, relative to Y's radius."""
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    U, s, Vt = np.linalg.svd(Xc.T @ Yc)
    scale = s.sum() / np.square(Xc).sum()
    return float(np.linalg.norm(scale * Xc @ U @ Vt - Yc) / np.linalg.norm(Yc))


@pytest.mark.parametrize("seed", range(4))
def test_stress1_agrees_with_scikit_learns_nonmetric_smacof_from_the_same_start(seed: int) -> None:
    smacof = pytest.importorskip("sklearn.manifold").smacof
    D, _ = _points(seed, n=40, p=5)
    D = D ** (1.0 + 0.5 * seed)  # the order is all that counts
    X0 = rank_start(D, 2)
    ours = refine_map(X0, D, "nonmetric")
    assert ours.converged and ours.criterion == pytest.approx(kruskal_stress1(ours.X, D))
    Xs, sk = smacof(D, metric=False, n_components=2, init=X0, n_init=1, max_iter=100_000, eps=1e-12,
                    normalized_stress=True)
    # Kruskal's stress-1 of both maps, by one formula: within 1 % (measured: 1e-10 relative)
    assert ours.criterion == pytest.approx(kruskal_stress1(Xs, D), rel=0.01)
    # scikit-learn's reported value uses its normalised disparities: at a fixed point it is S1 / √(1 − S1²)
    s1 = ours.criterion
    assert sk == pytest.approx(s1 / np.sqrt(1.0 - s1**2), rel=0.01)
    assert _similar(ours.X, Xs) < 0.05  # the same map up to similarity (measured 2e-4 .. 0.015: a flat valley)


def test_disparities_are_scikit_learns_isotonic_regression_with_ties_pooled() -> None:
    isotonic = pytest.importorskip("sklearn.isotonic")
    rng = np.random.default_rng(3)
    D = rng.integers(1, 6, size=(25, 25)).astype(float)  # many ties: the secondary approach pools them
    D = np.triu(D, 1) + np.triu(D, 1).T
    prob = OrdinalProblem(D)
    dist = rng.uniform(0.5, 3.0, size=prob.iu[0].size)
    expected = isotonic.IsotonicRegression(out_of_bounds="clip").fit_transform(D[prob.iu], dist)
    np.testing.assert_allclose(prob.isotonic(dist), expected, rtol=1e-12)
    fitted = prob.isotonic(dist)
    for value in np.unique(D[prob.iu]):  # tied dissimilarities get one disparity
        assert np.ptp(fitted[D[prob.iu] == value]) == 0.0
    H = prob.disparities(np.zeros((25, 25)) + cdist(rng.normal(size=(25, 2)), rng.normal(size=(25, 2)))[:25, :25])
    assert np.square(H[prob.iu]).sum() == pytest.approx(25 * 24 / 2)  # normalised as scikit-learn does


@pytest.mark.parametrize("name", sorted(INCREASING))
def test_a_strictly_increasing_transform_of_the_input_gives_the_same_map(name: str) -> None:
    g = INCREASING[name]
    D, _ = _points(5)
    base = LandmarkMDS(2, method="stress", landmark_map="nonmetric").fit(D)
    other = LandmarkMDS(2, method="stress", landmark_map="nonmetric").fit(g(D))
    assert other.map_criterion_ == pytest.approx(base.map_criterion_, rel=1e-9)
    assert _similar(other.landmark_map_, base.landmark_map_) < 1e-8
    # and not so for a metric map, which fits the values
    smacof = [LandmarkMDS(2, method="stress", landmark_map="smacof").fit(M).landmark_map_ for M in (D, g(D))]
    assert _similar(*smacof) > 1e-4


def test_integer_scores_place_arrivals_identically_under_any_increasing_relabelling() -> None:
    # ordinal data (ratings 1..7): the arrivals' values are knots of the fitted transformation
    rng = np.random.default_rng(11)
    P, Z = rng.normal(size=(25, 3)), rng.normal(size=(30, 3))
    bins = np.quantile(cdist(P, P)[np.triu_indices(25, 1)], np.linspace(0, 1, 8)[1:-1])
    score = lambda M: np.where(M > 0, 1 + np.digitize(M, bins), 0).astype(float)  # noqa: E731
    D, A = score(cdist(P, P)), score(cdist(Z, P))
    A = np.maximum(A, 1.0)
    relabel = np.array([0.0, 1.0, 1.5, 4.0, 4.1, 9.0, 20.0, 21.0])  # strictly increasing on 0..7
    a = LandmarkMDS(2, method="stress", landmark_map="nonmetric").fit(D)
    b = LandmarkMDS(2, method="stress", landmark_map="nonmetric").fit(relabel[D.astype(int)])
    ya, yb = a.transform(A), b.transform(relabel[A.astype(int)])
    np.testing.assert_allclose(yb, ya, atol=1e-9 * np.abs(ya).max())


def test_the_criterion_never_increases_along_the_iteration() -> None:
    P = np.random.default_rng(2).normal(size=(30, 4))
    D = cdist(P, P, metric="cityblock")  # non-Euclidean
    X0 = rank_start(D, 2)
    prob = OrdinalProblem(D)
    values = [prob.criterion(cdist(r.X, r.X)) for r in (refine_map(X0, D, "nonmetric", max_iter=k, rtol=0.0)
                                                       for k in range(0, 60, 3))]
    assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(values))
    assert values[-1] < 0.9 * values[0]


def test_the_monotone_transform_interpolates_and_extrapolates_proportionally() -> None:
    f = MonotoneTransform(knots_x=np.array([1.0, 2.0, 4.0]), knots_y=np.array([0.5, 0.5, 2.0]))
    np.testing.assert_allclose(f(np.array([1.0, 1.5, 3.0, 4.0])), [0.5, 0.5, 1.25, 2.0])
    np.testing.assert_allclose(f(np.array([0.0, 0.5, 8.0])), [0.0, 0.25, 4.0])  # δ·y₁/x₁ below, δ·y_K/x_K above
    grid = np.linspace(0, 10, 1001)
    assert (np.diff(f(grid)) >= 0).all()
    for x, y in (([1.0, 1.0], [0.0, 1.0]), ([1.0, 2.0], [1.0, 0.5]), ([-1.0, 2.0], [0.0, 1.0]), ([1.0], [1.0, 2.0])):
        with pytest.raises(InputError):
            MonotoneTransform(knots_x=np.array(x), knots_y=np.array(y))


def test_the_fitted_transform_maps_landmark_dissimilarities_onto_the_map() -> None:
    D, _ = _points(7)
    est = LandmarkMDS(2, method="stress", landmark_map="nonmetric").fit(D)
    model = est.model_
    f = model.map_transform
    iu = np.triu_indices(D.shape[0], 1)
    dhat = f(D[iu])
    X = est.landmark_map_
    dist = cdist(X, X)[iu]
    assert np.square(dhat).sum() == pytest.approx(iu[0].size, rel=1e-9)
    assert np.sqrt(np.square(dist - OrdinalProblem(D).isotonic(dist)).sum() / np.square(dist).sum()) == \
        pytest.approx(est.map_criterion_)
    # on the landmarks' own pairs, f gives the map's final (normalised) disparities
    np.testing.assert_allclose(dhat, OrdinalProblem(D).disparities(cdist(X, X))[iu], rtol=1e-12)
    assert np.corrcoef(dhat, dist)[0, 1] > 0.9
    assert map_stress(X, D, "nonmetric") == pytest.approx(est.map_criterion_)
    assert est.map_converged_ and est.map_tolerance_ == MAP_RTOL and "nonmetric" in LANDMARK_MAPS


@pytest.mark.parametrize("seed", range(3))
def test_arrivals_are_certified_stress_minima_no_worse_than_a_multi_start_search(seed: int) -> None:
    D, A = _points(seed, n=20, m=30)
    est = LandmarkMDS(2, method="stress", landmark_map="nonmetric").fit(D)
    res = est.embed(A)
    assert np.count_nonzero(res.flags & FLAG_NOT_CONVERGED) == 0
    X = est.landmark_map_
    delta = est.model_.map_transform(A)
    ours = stress_objective(res.y, X, delta)
    # brute force: the criterion's descent from a grid of 81 starts over the map's extent, best kept
    lo, hi = X.min(axis=0) - 1.0, X.max(axis=0) + 1.0
    g = np.stack(np.meshgrid(np.linspace(lo[0], hi[0], 9), np.linspace(lo[1], hi[1], 9)), -1).reshape(-1, 2)
    starts = np.repeat(g[None], A.shape[0], axis=0).reshape(-1, 2)
    sol = solve_stress(starts, X, np.repeat(delta, g.shape[0], axis=0))
    best = sol.objective.reshape(A.shape[0], -1).min(axis=1)
    assert (ours <= best * (1 + 1e-9) + 1e-12).mean() >= 0.9  # a local method: the global minimum nearly always
    assert np.median(ours / best) <= 1 + 1e-9


def test_a_nonmetric_model_round_trips_through_its_file(tmp_path) -> None:
    D, A = _points(4)
    est = LandmarkMDS(2, method="stress", landmark_map="nonmetric").fit(D)
    est.save(tmp_path / "m.npz")
    back = LandmarkMDS.load(tmp_path / "m.npz")
    assert back.landmark_map == "nonmetric" and back.map_info_ == est.map_info_
    np.testing.assert_array_equal(back.model_.map_transform.knots_x, est.model_.map_transform.knots_x)
    np.testing.assert_array_equal(back.model_.map_transform.knots_y, est.model_.map_transform.knots_y)
    np.testing.assert_array_equal(back.transform(A), est.transform(A))
    # knots are required for a non-metric map and refused for any other
    from streamembed import model_io

    arrays = model_io.model_arrays(est.model_)
    for drop in ("map_transform_x", "map_transform_y"):
        with pytest.raises(ValueError, match="monotone transformation"):
            model_io._map_transform({k: v for k, v in arrays.items() if k != drop}, "nonmetric")
    with pytest.raises(ValueError, match="cannot have"):
        model_io._map_transform(arrays, "smacof")


def test_a_file_whose_knots_are_not_monotone_is_refused(tmp_path) -> None:
    import json

    D, _ = _points(4)
    est = LandmarkMDS(2, method="stress", landmark_map="nonmetric").fit(D)
    est.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
        files = {k: npz[k] for k in npz.files}
    files["map_transform_y"] = files["map_transform_y"][::-1].copy()
    from streamembed import model_io

    meta = json.loads(str(files.pop("meta")))
    meta["checksum_sha256"] = model_io._checksum(files, meta)
    np.savez(tmp_path / "bad.npz", meta=np.array(json.dumps(meta, sort_keys=True)), **files)
    with pytest.raises(ModelFileError, match="non-decreasing"):
        LandmarkMDS.load(tmp_path / "bad.npz")


def test_a_nonmetric_map_places_with_the_criteria_only() -> None:
    D, A = _points(1)
    with pytest.raises(InputError, match="needs the classical-MDS map"):
        LandmarkMDS(2, method="projection", landmark_map="nonmetric").fit(D)
    est = LandmarkMDS(2, method="l1", landmark_map="nonmetric").fit(D)
    assert np.isfinite(est.transform(A)).all()
    with pytest.raises(InputError, match="classical-MDS map"):
        est.embed(A, method="restricted")
