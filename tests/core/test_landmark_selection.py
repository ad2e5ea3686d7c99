"""select_landmarks and its strategies against reference properties (docs/landmarks.md, docs/math.md §5.1)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.errors import InputError
from streamembed.core.landmarks import (
    LANDMARK_SELECTIONS,
    Dissimilarities,
    captured_variance,
    kmeanspp_select,
    kmedoids_select,
    random_select,
    rpcholesky_select,
    select_landmarks,
)

from .conftest import euclidean


def _centred_kernel(D: np.ndarray) -> np.ndarray:
    D2 = D**2
    r = D2.mean(axis=1)
    return -0.5 * (D2 - r[:, None] - r[None, :] + r.mean())


def _nystrom_error(K: np.ndarray, S: np.ndarray) -> float:
    """tr(K − K[:, S] K[S, S]⁺ K[S, :]): the trace error of the Nyström approximation on pivots S."""
    C = K[:, S]
    return float(np.trace(K) - np.trace(C @ np.linalg.pinv(K[np.ix_(S, S)]) @ C.T))


def test_rpcholesky_meets_its_trace_error_guarantee():
    """Chen, Epperly, Tropp, Webber (2023), Thm 3.1: E tr(K − K̂_k) ≤ (1 + ε) tr(K − [K]_r) once
    k ≥ r/ε + r log(1/(ε η)), η = tr(K − [K]_r)/tr(K). With ε = 1, checked for the largest such r
    (mean over 40 seeds, 10 % sampling slack)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 30)) * np.exp(-0.15 * np.arange(30))
    D = euclidean(X, X)
    K = _centred_kernel(D)
    w = np.sort(np.linalg.eigvalsh(K))[::-1]
    k = 24
    tails = np.array([w[r:].sum() for r in range(k)])
    ok = [r for r in range(1, k) if k >= r + r * np.log(w.sum() / tails[r])]
    r = max(ok)
    errors = [_nystrom_error(K, rpcholesky_select(k, Dissimilarities(D), np.random.default_rng(s))) for s in range(40)]
    assert np.mean(errors) <= 1.1 * 2.0 * tails[r], (np.mean(errors), tails[r], r)
    uniform = [_nystrom_error(K, random_select(k, 300, np.random.default_rng(s))) for s in range(40)]
    assert np.mean(errors) < np.mean(uniform)  # adaptive pivots beat uniform ones on a decaying spectrum


def test_rpcholesky_of_a_low_rank_kernel_fills_the_rest_without_repeats():
    X = np.random.default_rng(1).normal(size=(100, 3))
    S = rpcholesky_select(20, Dissimilarities(X=X), np.random.default_rng(0))
    assert S.size == 20 and np.unique(S).size == 20  # rank 3 exhausted after a few pivots, then k-means++


def test_kmeanspp_draws_each_pick_with_probability_proportional_to_its_squared_distance():
    pts = np.array([[0.0], [1.0], [2.0], [4.0], [7.0]])
    D = euclidean(pts, pts)
    draws = 20_000
    counts = np.zeros(5)
    rng = np.random.default_rng(0)
    for _ in range(draws):
        counts[kmeanspp_select(2, D, rng, first=0)[1]] += 1
    p = D[0] ** 2 / (D[0] ** 2).sum()
    se = np.sqrt(p * (1 - p) / draws)
    assert counts[0] == 0 and np.all(np.abs(counts / draws - p) <= 4 * se + 1e-12), (counts / draws, p)


def test_kmedoids_updates_lower_the_kmedoids_objective_of_their_seeding():
    rng = np.random.default_rng(2)
    X = np.vstack([rng.normal(loc=c, size=(80, 2)) for c in ([0, 0], [6, 0], [0, 6], [6, 6])])
    dis = Dissimilarities(euclidean(X, X))
    for seed in range(5):
        seeded = kmedoids_select(8, dis, np.random.default_rng(seed), iterations=0)
        updated = kmedoids_select(8, dis, np.random.default_rng(seed), iterations=5)
        cost = lambda L: dis.rows(L).min(axis=0).sum()  # noqa: E731
        assert cost(updated) <= cost(seeded) + 1e-9


def test_max_variance_returns_the_candidate_set_whose_map_holds_the_most_variance():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 5)) * [3.0, 2.8, 1.0, 0.5, 0.5]
    D = euclidean(X, X)
    chosen = select_landmarks("max-variance", 30, D=D, seed=7, candidates=6)
    spawned = np.random.default_rng(7).spawn(6)
    dis = Dissimilarities(D)
    sets = [np.sort(random_select(30, 400, r)) for r in spawned]
    scores = [captured_variance(L, dis, np.arange(400), 2) for L in sets]
    np.testing.assert_array_equal(chosen, sets[int(np.argmax(scores))])
    full = np.sort(np.linalg.eigvalsh(np.cov(X.T, bias=True)))[::-1][:2].sum()
    assert max(scores) <= full * (1 + 1e-9)  # no d-plane holds more than the full classical MDS's


@pytest.mark.parametrize("strategy", LANDMARK_SELECTIONS)
def test_every_strategy_is_seeded_sorted_and_distinct(strategy):
    X = np.random.default_rng(4).normal(size=(150, 4))
    a = select_landmarks(strategy, 20, X=X, seed=1)
    b = select_landmarks(strategy, 20, D=euclidean(X, X), seed=1)
    assert a.size == 20 and np.unique(a).size == 20 and np.all(np.diff(a) > 0)
    np.testing.assert_array_equal(a, select_landmarks(strategy, 20, X=X, seed=1))  # same seed, same landmarks
    np.testing.assert_array_equal(a, b)  # features or their distance matrix: the same choice


@pytest.mark.parametrize("strategy", LANDMARK_SELECTIONS)
def test_duplicates_leave_fewer_landmarks_with_a_warning_naming_the_count(strategy, caplog):
    X = np.repeat(np.random.default_rng(5).normal(size=(10, 3)), 3, axis=0)
    with caplog.at_level(logging.WARNING, logger="streamembed"):
        L = select_landmarks(strategy, 15, X=X, seed=0)
    assert L.size == 10 and np.unique(X[L], axis=0).shape[0] == 10
    assert "only 10 distinct objects among 30" in caplog.text


def test_identical_objects_are_refused_by_the_fit_with_a_clear_message():
    with pytest.raises(InputError, match="only 1 distinct objects among the 20 given"):
        LandmarkMDS(n_landmarks=5).fit(np.zeros((20, 20)))
    with pytest.raises(InputError, match="only 1 distinct objects"):
        LandmarkMDS(n_landmarks=5).fit_features(np.ones((20, 3)))


def test_unknown_strategy_and_bad_counts_are_refused():
    X = np.zeros((10, 2))
    with pytest.raises(InputError, match="landmark selection must be one of"):
        select_landmarks("best", 3, X=X)
    with pytest.raises(InputError, match="between 1 and 10"):
        select_landmarks("random", 11, X=X)
    with pytest.raises(InputError, match="exactly one of D"):
        select_landmarks("random", 3)


def test_the_estimator_keeps_n_landmarks_and_takes_rows_to_all_objects_or_to_the_landmarks():
    X = np.random.default_rng(6).normal(size=(300, 4)) * [3, 2, 1, 0.5]
    D = euclidean(X, X)
    est = LandmarkMDS(n_components=2, n_landmarks=40, random_state=2).fit(D)
    L = est.landmark_indices_
    assert L.size == 40 and est.n_features_in_ == 300 and list(est.landmark_ids_) == [str(i) for i in L]
    np.testing.assert_array_equal(est.transform(D[:7]), est.transform(D[:7][:, L]))
    ref = LandmarkMDS(n_components=2).fit(D[np.ix_(L, L)])
    np.testing.assert_allclose(est.transform(D[:7]), ref.transform(D[:7][:, L]), atol=1e-10)
