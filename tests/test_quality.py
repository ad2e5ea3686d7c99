"""Quality measures on cases with known answers (Roy 2021, §1.3; the five-criteria note)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance as ssd

from streamembed.core.errors import InputError
from streamembed.quality import (
    pairwise_stress,
    procrustes_fidelity,
    stress_to_reference,
    trustworthiness_continuity,
)


def dist(X: np.ndarray) -> np.ndarray:
    return ssd.squareform(ssd.pdist(X))


def test_identity_embedding_is_perfectly_trustworthy_and_continuous() -> None:
    X = np.random.default_rng(0).normal(size=(80, 2))
    T, C = trustworthiness_continuity(dist(X), X, k=7)
    assert T == 1.0 and C == 1.0


def test_rigid_motion_keeps_neighbourhoods() -> None:
    X = np.random.default_rng(1).normal(size=(60, 3))
    Q, _ = np.linalg.qr(np.random.default_rng(2).normal(size=(3, 3)))
    assert trustworthiness_continuity(dist(X), X @ Q + 4.0, k=5) == (1.0, 1.0)


def test_hand_computed_swap_on_a_line() -> None:
    # Points at 0, 1, 3, 6, 10; the embedding swaps the two ends. With k = 1 the
    # false neighbours have original ranks 3, 4, 3 (penalties 2 + 3 + 2 = 7) and
    # the lost ones embedded ranks 3, 4, 3; scale 2/(N k (2N - 3k - 1)) = 1/15.
    x = np.array([0.0, 1.0, 3.0, 6.0, 10.0])[:, None]
    y = np.array([10.0, 1.0, 3.0, 6.0, 0.0])[:, None]
    T, C = trustworthiness_continuity(dist(x), y, k=1)
    assert pytest.approx(8 / 15) == T
    assert pytest.approx(8 / 15) == C


def test_shuffled_embedding_has_low_trustworthiness() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    T, C = trustworthiness_continuity(dist(X), X[rng.permutation(300)], k=10)
    assert T < 0.6 and C < 0.6  # a random map scores about 0.5


def test_continuity_is_trustworthiness_with_roles_swapped() -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 5))
    Y = X[:, :2] + 0.3 * rng.normal(size=(120, 2))
    T, C = trustworthiness_continuity(dist(X), Y, k=8)
    T_swapped, C_swapped = trustworthiness_continuity(dist(Y), X, k=8)
    assert pytest.approx(T_swapped) == C and pytest.approx(C_swapped) == T


def test_trustworthiness_matches_scikit_learn() -> None:
    manifold = pytest.importorskip("sklearn.manifold")
    rng = np.random.default_rng(5)
    X = rng.normal(size=(150, 6))
    Y = X[:, :2] + 0.5 * rng.normal(size=(150, 2))
    T, _ = trustworthiness_continuity(dist(X), Y, k=9)
    assert pytest.approx(manifold.trustworthiness(X, Y, n_neighbors=9), abs=1e-12) == T


def test_k_too_large_is_refused() -> None:
    X = np.zeros((6, 2)) + np.arange(6)[:, None]
    with pytest.raises(InputError):
        trustworthiness_continuity(dist(X), X, k=4)


def test_hand_computed_stress() -> None:
    # y = (0, 0); references (3, 0) and (0, 4): embedded distances 3 and 4 against
    # dissimilarities 2 and 5 -> raw (1² + 1²) = 2, normalised 2 / (4 + 25).
    st = stress_to_reference(np.zeros((1, 2)), np.array([[3.0, 0.0], [0.0, 4.0]]), np.array([[2.0, 5.0]]))
    assert st.raw == pytest.approx(2.0)
    assert st.normalised == pytest.approx(2 / 29)
    assert st.n_pairs == 2


def test_pairwise_stress_counts_each_pair_once() -> None:
    Y = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0]])  # distances 3, 4, 5
    Delta = np.array([[0, 3, 4], [3, 0, 6], [4, 6, 0]], dtype=float)
    st = pairwise_stress(Y, Delta)
    assert st.raw == pytest.approx(1.0) and st.n_pairs == 3
    assert st.normalised == pytest.approx(1 / (9 + 16 + 36))


def test_procrustes_fidelity_of_a_moved_copy_is_zero() -> None:
    rng = np.random.default_rng(6)
    L, Y = rng.normal(size=(20, 2)), rng.normal(size=(15, 2))
    c, s = np.cos(0.7), np.sin(0.7)
    R = np.array([[c, -s], [s, c]])
    fid = procrustes_fidelity(L, L @ R + 3.0, Y, Y @ R + 3.0)
    assert fid.rmse < 1e-12 and fid.relative < 1e-12 and fid.landmark_residual < 1e-12
    moved = procrustes_fidelity(L, L @ R + 3.0, Y, Y @ R + 3.0 + np.array([1.0, 0.0]))
    assert moved.rmse == pytest.approx(1.0)


# ----------------------------------------------------------------------------- whole maps vs the full classical MDS


def test_classical_mds_matches_a_dense_eigendecomposition() -> None:
    from streamembed.core.runtime import single_blas_thread
    from streamembed.quality import classical_mds

    X = np.random.default_rng(5).normal(size=(240, 4)) * np.array([5.0, 3.0, 1.0, 0.5])  # > 200: Lanczos
    D = dist(X)
    J = np.eye(240) - 1.0 / 240
    B = -0.5 * J @ np.square(D) @ J
    with single_blas_thread():
        w, V = np.linalg.eigh(B)
        full = classical_mds(D, 2)
    np.testing.assert_allclose(full.eigenvalues, w[::-1][:4], rtol=1e-8)
    np.testing.assert_allclose(np.abs(full.Y), np.abs(V[:, ::-1][:, :2] * np.sqrt(w[::-1][:2])), atol=1e-7)
    assert full.trace == pytest.approx(np.trace(B))


def test_procrustes_share_and_subspace_distance_ignore_rigid_motions_and_see_rotations_out_of_plane() -> None:
    from streamembed.quality import procrustes_share, subspace_distance

    rng = np.random.default_rng(6)
    Y = rng.normal(size=(200, 2)) * [3.0, 1.0]
    Q, _ = np.linalg.qr(rng.normal(size=(2, 2)))
    assert procrustes_share(Y @ Q + [5.0, -2.0], Y) < 1e-12
    assert subspace_distance(Y @ Q + 1.0, Y) < 1e-12
    Z = rng.normal(size=(200, 1))
    tilted = np.column_stack([Y[:, 0], np.cos(0.3) * Y[:, 1] + np.sin(0.3) * Z[:, 0] * Y[:, 1].std() / Z[:, 0].std()])
    assert 0.05 < subspace_distance(tilted, Y) < 0.5
    assert procrustes_share(np.zeros_like(Y), Y) == pytest.approx(1.0)  # a collapsed map misses all of Y's radius


def test_trustworthiness_from_precomputed_ranks_equals_the_full_sort_and_spearman_equals_scipy() -> None:
    import scipy.stats

    from streamembed.quality import NeighbourRanks, PairRanks, spearman_agreement, trustworthiness

    rng = np.random.default_rng(7)
    X = rng.normal(size=(150, 5))
    D = dist(X)
    Y = X[:, :2] + 0.3 * rng.normal(size=(150, 2))
    ranks = NeighbourRanks(D)
    for k in (1, 5, 12):
        assert trustworthiness(ranks, Y, k) == pytest.approx(trustworthiness_continuity(D, Y, k)[0], abs=1e-12)
    iu = np.triu_indices(150, 1)
    expected = scipy.stats.spearmanr(ssd.pdist(Y), D[iu]).statistic
    assert spearman_agreement(D, Y) == pytest.approx(expected, abs=1e-12)
    assert spearman_agreement(PairRanks(D), Y) == pytest.approx(expected, abs=1e-12)
    sampled = spearman_agreement(D, Y, max_pairs=3000)
    assert abs(sampled - expected) < 0.05
