"""Nadaraya–Watson placement (docs/math.md §8.6): convex combinations of the map, the nearest landmark as σ → 0,
Roy's bandwidth rule, refusals, and the routine's contract (valid rows only, thread-safe)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.optimize import nnls
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS
from streamembed.core.errors import InputError
from streamembed.core.place.kernel import bandwidth, check_bandwidth, kernel_routine, kernel_weights, place_kernel


@dataclass(frozen=True)
class _Geometry:
    X: np.ndarray
    bandwidth: float | None


def _maps(L: np.ndarray) -> dict[str, np.ndarray]:
    """The landmark maps kernel placement averages: classical, SMACOF, Sammon, ordinal, skeleton."""
    D = cdist(L, L)
    out = {kind: LandmarkMDS(2, method="stress", landmark_map=kind).fit(D).embedding_
           for kind in ("smacof", "sammon", "nonmetric")}
    out["cmds"] = LandmarkMDS(2).fit(D).embedding_
    return out


@pytest.mark.parametrize("sigma", [0.3, 1.0, 5.0])
def test_every_placement_is_a_convex_combination_of_the_map_on_every_map_kind(sigma: float) -> None:
    """NNLS with a heavily weighted row of ones recovers weights ≥ 0 summing to 1 that reproduce each placement."""
    rng = np.random.default_rng(0)
    L, Z = rng.normal(size=(15, 3)), rng.normal(size=(20, 3)) * 1.5
    for kind, Y in _maps(L).items():
        P = place_kernel(cdist(Z, L), Y, sigma)
        M = np.vstack([Y.T, 1e3 * np.ones(15)])
        for y in P:
            w, res = nnls(M, np.r_[y, 1e3])
            assert res < 1e-8 * (1 + np.abs(Y).max()), kind
            assert w.sum() == pytest.approx(1.0, abs=1e-9)


def test_the_skeleton_map_is_averaged_like_any_other() -> None:
    from streamembed.core.fit.skeleton import fit_skeleton

    rng = np.random.default_rng(1)
    F = rng.normal(size=(120, 3))
    est = LandmarkMDS(2, landmark_selection="skeleton", metric="euclidean").fit(F)
    sk = fit_skeleton(F)
    assert est.skeleton_ is not None and est.skeleton_.bandwidth == pytest.approx(sk.bandwidth)
    P = place_kernel(cdist(F, est.landmark_features_), est.embedding_, est.skeleton_.bandwidth)
    lo, hi = est.embedding_.min(axis=0), est.embedding_.max(axis=0)
    assert (P.min(axis=0) >= lo - 1e-12).all() and (P.max(axis=0) <= hi + 1e-12).all()


def test_landmarks_placed_on_themselves_return_their_own_coordinates_when_sigma_is_small() -> None:
    rng = np.random.default_rng(2)
    L = rng.normal(size=(25, 4))
    D = cdist(L, L)
    nearest = np.min(D + np.diag(np.full(25, np.inf)))
    for Y in _maps(L).values():
        assert np.allclose(place_kernel(D, Y, nearest / 20), Y, atol=1e-12)
        assert np.allclose(place_kernel(D, Y, 1e-300), Y, atol=0)  # no underflow to 0/0
        far = place_kernel(D, Y, 1e6)
        assert np.allclose(far, Y.mean(axis=0), atol=1e-6)  # a huge σ: every landmark weighs the same


def test_weights_are_the_normalised_gaussian_kernel_even_far_from_every_landmark() -> None:
    """δ = (0, 1, 2), σ = 0.5: w ∝ (1, e⁻², e⁻⁸). δ = (1000, 1001, 2000): exp(−δ²/2σ²) underflows to 0 for every
    landmark, yet the weights are (1, e^(−4002), …) normalised, i.e. the nearest landmark."""
    W = kernel_weights(np.array([[0.0, 1.0, 2.0], [1e3, 1e3 + 1.0, 2e3]]), 0.5)
    w = np.exp([0.0, -2.0, -8.0])
    assert np.allclose(W[0], w / w.sum(), rtol=1e-14)
    assert W[1].tolist() == [1.0, 0.0, 0.0]


def test_the_bandwidth_rule_covers_the_landmarks() -> None:
    """σ = max_s √(b_s² + min_{s′≠s} D(s, s′)²): on 0, 1, 3 with b = (0, 2, 0): √(0+1), √(4+1), √(0+4) -> √5."""
    L = np.array([[0.0], [1.0], [3.0]])
    D = cdist(L, L)
    assert bandwidth(D) == pytest.approx(2.0)
    assert bandwidth(D, [0.0, 2.0, 0.0]) == pytest.approx(np.sqrt(5.0))
    with pytest.raises(InputError, match="n >= 2"):
        bandwidth(np.zeros((1, 1)))
    with pytest.raises(InputError, match="finite number > 0"):
        bandwidth(np.zeros((3, 3)))  # every landmark at one place
    with pytest.raises(InputError, match="boundary distances"):
        bandwidth(D, [0.0, -1.0, 0.0])


@pytest.mark.parametrize("sigma", [0.0, -1.0, np.nan, np.inf, "1", True, None])
def test_a_zero_or_non_finite_bandwidth_is_refused(sigma: object) -> None:
    with pytest.raises(InputError, match="finite number > 0"):
        check_bandwidth(sigma)
    with pytest.raises(InputError, match="finite number > 0"):
        place_kernel(np.ones((1, 3)), np.zeros((3, 2)), sigma)  # type: ignore[arg-type]


def test_the_routine_places_valid_rows_only_and_leaves_t_and_flags() -> None:
    rng = np.random.default_rng(3)
    L, Z = rng.normal(size=(10, 2)), rng.normal(size=(6, 2))
    Y = LandmarkMDS(2).fit(cdist(L, L)).model_.natural_embedding
    A = cdist(Z, L)
    A[2] = np.nan  # an invalid row as the placer passes it
    valid = np.ones(6, dtype=bool)
    valid[2] = False
    y0 = np.full((6, 2), 7.0)
    t, flags = np.full(6, np.nan), np.zeros(6, dtype=np.uint32)
    y, t2, f2 = kernel_routine(A, y0.copy(), np.ones(6), np.ones(2), valid, t, flags, _Geometry(Y, 0.8))
    assert np.allclose(y[valid], place_kernel(A[valid], Y, 0.8)) and (y[2] == 7.0).all()
    assert np.isnan(t2).all() and not f2.any()
    with pytest.raises(InputError, match="needs the map's bandwidth"):
        kernel_routine(A, y0.copy(), np.ones(6), np.ones(2), valid, t, flags, _Geometry(Y, None))
    with pytest.raises(InputError, match="finite number > 0"):
        kernel_routine(A, y0.copy(), np.ones(6), np.ones(2), valid, t, flags, _Geometry(Y, 0.0))


def test_threads_sharing_a_map_get_bit_identical_placements() -> None:
    rng = np.random.default_rng(4)
    L, Z = rng.normal(size=(40, 3)), rng.normal(size=(2000, 3))
    Y = LandmarkMDS(2).fit(cdist(L, L)).embedding_
    A = cdist(Z, L)
    one = place_kernel(A, Y, 0.7)
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: place_kernel(A, Y, 0.7), range(8)))
    assert all(np.array_equal(r, one) for r in runs)


def test_mismatched_shapes_and_non_finite_rows_are_refused() -> None:
    with pytest.raises(InputError, match=r"rows \(m, n\) and a map \(n, d\)"):
        place_kernel(np.ones((2, 3)), np.zeros((4, 2)), 1.0)
    with pytest.raises(InputError, match="finite dissimilarities"):
        place_kernel(np.array([[1.0, np.nan]]), np.zeros((2, 2)), 1.0)
