"""``select_landmarks`` and its strategies against exact references (docs/landmarks.md, docs/math.md §5)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from streamembed.core.runtime import single_blas_thread
from streamembed.core.errors import InputError
from streamembed.core.refit.landmarks import LANDMARK_SELECTIONS, select_landmarks
from streamembed.core.inputs.dissimilarities import Dissimilarities
from streamembed.core.refit.strategies import captured_variance, kmeanspp_select, kmedoids_select, rpcholesky_select

from ..conftest import euclidean


def centred_kernel(D: np.ndarray) -> np.ndarray:
    """K = −½ J Δ² J (N, N), brute force."""
    N = D.shape[0]
    J = np.eye(N) - 1.0 / N
    return -0.5 * J @ np.square(D) @ J


def nystrom_trace_error(K: np.ndarray, S: np.ndarray) -> float:
    """tr(K − K[:, S] K[S, S]⁺ K[S, :]): what the pivots S leave of K in trace norm."""
    C = K[:, S]
    return float(np.trace(K - C @ np.linalg.pinv(K[np.ix_(S, S)], rcond=1e-12) @ C.T))


def clustered(rng: np.random.Generator, N: int = 80, p: int = 8) -> np.ndarray:
    """Unequal clusters with a decaying spectrum: uniform picks miss the small ones, pivoting does not."""
    centres = rng.normal(size=(6, p)) * np.array([12, 9, 7, 5, 3, 2, 1, 1])[:p]
    sizes = np.array([40, 20, 10, 5, 3, 2])[:6] * N // 80
    X = np.vstack([c + 0.5 * rng.normal(size=(int(s), p)) for c, s in zip(centres, sizes, strict=True)])
    return X


def test_rpcholesky_trace_error_is_within_the_bound_of_chen_et_al(rng):
    """Chen, Epperly, Tropp, Webber (2023), Thm 3.1: E tr(K − K̂) ≤ (1 + ε) tr(K − [[K]]_r) once the number of
    pivots k ≥ r/ε + r log(1/(ε η)), η = tr(K − [[K]]_r)/tr(K). Checked as the mean over 200 seeds with ε = 1."""
    X = clustered(rng)
    D = euclidean(X, X)
    K = centred_kernel(D)
    lam = np.sort(np.linalg.eigvalsh(K))[::-1]
    dis = Dissimilarities(D=D)
    k = 14
    # the largest r the theorem covers with k pivots and ε = 1
    tails = {r: float(lam[r:].clip(min=0).sum()) for r in range(1, k)}
    r = max(r for r in tails if k >= r + r * np.log(1.0 / (tails[r] / lam.clip(min=0).sum())))
    errors = [nystrom_trace_error(K, rpcholesky_select(k, dis, np.random.default_rng(s))) for s in range(200)]
    assert np.mean(errors) <= 2.0 * tails[r], (np.mean(errors), tails[r], r)
    # and pivoting beats uniform picks on unequal clusters (the reason it exists)
    uniform = [nystrom_trace_error(K, np.random.default_rng(s).choice(len(X), k, replace=False)) for s in range(200)]
    assert np.mean(errors) < 0.5 * np.mean(uniform)


def test_rpcholesky_pivots_are_drawn_in_proportion_to_the_residual_diagonal():
    """First pivot ∝ diag K; second ∝ diag of K minus the first pivot's Cholesky column (exact probabilities)."""
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0], [4.0, 1.0], [2.0, 2.0]])
    D = euclidean(X, X)
    K = centred_kernel(D)
    dis = Dissimilarities(D=D)
    trials = 3000
    firsts = np.array([rpcholesky_select(1, dis, np.random.default_rng(s))[0] for s in range(trials)])
    p = np.diag(K) / np.trace(K)
    counts = np.bincount(firsts, minlength=5)
    sd = np.sqrt(trials * p * (1 - p))
    assert np.all(np.abs(counts - trials * p) <= 4.5 * sd + 1), (counts, trials * p)
    # second pivot given the first is object 3 (required first): ∝ diag(K − K[:,3]K[3,:]/K[3,3])
    R = K - np.outer(K[:, 3], K[3, :]) / K[3, 3]
    q = np.clip(np.diag(R), 0, None)
    q /= q.sum()
    seconds = np.array([rpcholesky_select(2, dis, np.random.default_rng(s), required=np.array([3]))[1]
                        for s in range(trials)])
    counts = np.bincount(seconds, minlength=5)
    sd = np.sqrt(trials * q * (1 - q))
    assert counts[3] == 0 and np.all(np.abs(counts - trials * q) <= 4.5 * sd + 1), (counts, trials * q)


def test_kmeanspp_draws_each_next_pick_with_probability_proportional_to_d_squared():
    X = np.array([[0.0], [1.0], [2.0], [5.0], [9.0]])
    D = euclidean(X, X)
    trials = 6000
    second = np.array([kmeanspp_select(2, D, np.random.default_rng(s), first=0)[1] for s in range(trials)])
    p = np.square(D[0]) / np.square(D[0]).sum()  # 0, 1, 4, 25, 81 over 111
    counts = np.bincount(second, minlength=5)
    sd = np.sqrt(trials * p * (1 - p))
    assert counts[0] == 0 and np.all(np.abs(counts - trials * p) <= 4.5 * sd + 1), (counts, trials * p)
    # third pick given {0, 4}: ∝ min(δ(i, 0), δ(i, 4))² = 0, 1, 4, 16, 0
    third = [s for s in range(trials) if second[s] == 4][:2000]
    picks = np.array([kmeanspp_select(3, D, np.random.default_rng(s), first=0)[2] for s in third])
    q = np.array([0.0, 1.0, 4.0, 16.0, 0.0]) / 21.0
    counts = np.bincount(picks, minlength=5)
    sd = np.sqrt(len(third) * q * (1 - q))
    assert np.all(np.abs(counts - len(third) * q) <= 4.5 * sd + 1), (counts, len(third) * q)


def kmedoids_cost(D: np.ndarray, medoids: np.ndarray) -> float:
    """Σ_i min_m δ(i, m): the k-medoids objective."""
    return float(D[:, medoids].min(axis=1).sum())


def test_kmedoids_never_worsens_its_kmeanspp_seeding_and_usually_improves_it(rng):
    X = clustered(rng, N=160)
    D = euclidean(X, X)
    dis = Dissimilarities(D=D)
    better = 0
    for s in range(20):
        seeding = kmeanspp_select(12, dis, np.random.default_rng(s))
        medoids = kmedoids_select(12, dis, np.random.default_rng(s))  # the same generator state seeds it
        assert np.unique(medoids).size == 12
        assert kmedoids_cost(D, medoids) <= kmedoids_cost(D, seeding) + 1e-9
        better += kmedoids_cost(D, medoids) < kmedoids_cost(D, seeding) - 1e-9
    assert better >= 15


def test_captured_variance_reaches_the_full_classical_mds_only_with_every_object(rng):
    """Σ_{top d} λ / N of the full CMDS bounds the variance any landmark map holds (docs/math.md §5.1)."""
    X = rng.normal(size=(120, 5)) * np.array([5.0, 3.0, 2.0, 1.0, 0.5])
    D = euclidean(X, X)
    dis = Dissimilarities(D=D)
    lam = np.sort(np.linalg.eigvalsh(centred_kernel(D)))[::-1]
    best = lam[:2].sum() / 120
    everyone = np.arange(120)
    with single_blas_thread():
        assert captured_variance(everyone, dis, everyone, 2) == pytest.approx(best, rel=1e-9)
        for s in range(10):
            L = np.random.default_rng(s).choice(120, 15, replace=False)
            assert captured_variance(L, dis, everyone, 2) <= best * (1 + 1e-9)


@pytest.mark.parametrize("strategy", LANDMARK_SELECTIONS)
def test_every_strategy_is_seeded_sorted_distinct_and_the_same_from_features_or_matrix(strategy, rng):
    X = clustered(rng, N=80, p=4)
    D = euclidean(X, X)
    a = select_landmarks(strategy, 10, D=D, seed=3)
    b = select_landmarks(strategy, 10, X=X, seed=3)
    c = select_landmarks(strategy, 10, D=D, seed=np.random.default_rng(3))
    assert a.size == 10 and np.all(np.diff(a) > 0) and a.min() >= 0 and a.max() < 80
    assert np.array_equal(a, b) and np.array_equal(a, c)
    kept = select_landmarks(strategy, 10, D=D, seed=3, required=np.array([5, 70]))
    assert {5, 70} <= set(kept.tolist()) and kept.size == 10


def test_duplicates_give_fewer_landmarks_with_a_warning_naming_the_count(caplog):
    X = np.repeat(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 3.0]]), 5, axis=0)  # 4 distinct, 20 objects
    for strategy in LANDMARK_SELECTIONS:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="streamembed"):
            sel = select_landmarks(strategy, 6, X=X, seed=0)
        assert sel.size == 4 and len({tuple(x) for x in X[sel]}) == 4, strategy
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "only 4 distinct objects among 20" in warnings[0] and "instead of 6" in warnings[0]


def test_identical_objects_are_refused_and_rank_deficient_ones_refused_by_the_fit():
    from streamembed import LandmarkMDS

    for strategy in LANDMARK_SELECTIONS:
        with pytest.raises(InputError, match="all 12 objects are identical"):
            select_landmarks(strategy, 5, X=np.ones((12, 3)), seed=0)
    line = np.outer(np.arange(30.0), [1.0, 2.0, -1.0])  # rank 1: no 2-D map
    for strategy in LANDMARK_SELECTIONS:
        sel = select_landmarks(strategy, 8, X=line, seed=0)
        assert sel.size == 8
        with pytest.raises(InputError, match="exceeds the 1 positive eigenvalues"):
            LandmarkMDS(n_components=2, n_landmarks=8, landmark_selection=strategy).fit_features(line)


def test_bad_arguments_are_refused():
    D = euclidean(np.eye(5), np.eye(5))
    with pytest.raises(InputError, match="landmark selection must be one of"):
        select_landmarks("best", 2, D=D)
    with pytest.raises(InputError, match="between 1 and 5"):
        select_landmarks("random", 6, D=D)
    with pytest.raises(InputError, match="exactly one of D"):
        select_landmarks("random", 2)
    with pytest.raises(InputError, match="required landmarks"):
        select_landmarks("random", 2, D=D, required=np.array([0, 1, 2]))


def test_squared_row_means_of_euclidean_features_match_the_matrix(rng):
    X = rng.normal(size=(50, 3)) + 10.0
    D = euclidean(X, X)
    np.testing.assert_allclose(Dissimilarities(X=X).squared_row_means(), np.square(D).mean(axis=1), rtol=1e-10)
    np.testing.assert_allclose(Dissimilarities(X=X, metric="cityblock").squared_row_means(),
                               np.square(np.abs(X[:, None] - X[None]).sum(-1)).mean(axis=1), rtol=1e-10)
