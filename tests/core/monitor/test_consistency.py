"""The landmark-profile share (core/monitor/consistency.py, docs/math.md §4.5): exact where it can be,
measured on real data."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.monitor.consistency import PROFILE_AXES, profile_check
from streamembed.core.model import fit_model
from benchmarks.mixups import MIXUPS

from ...realdata import matrix, setting
from ..conftest import euclidean


def test_a_shuffled_row_scores_chance_exactly_on_average_over_every_order() -> None:
    """E[s] over all n! column orders is q/(n - 1): brute force on n = 7 (5040 orders), non-Euclidean data."""
    rng = np.random.default_rng(3)
    n = 7
    X = rng.random((n + 1, 3))
    D = np.abs(X[:, None, :] - X[None, :, :]).sum(-1)  # city block: not Euclidean
    model = fit_model(D[:n, :n], n_components=2)
    check = profile_check(model)
    a = D[n, :n]
    rows = np.array([a[list(p)] for p in itertools.permutations(range(n))])
    assert check.chance == pytest.approx(check.basis.shape[1] / (n - 1))
    assert check.shares(rows).mean() == pytest.approx(check.chance, abs=1e-12)


def test_every_row_of_low_dimensional_euclidean_data_scores_one() -> None:
    """Points in R^3: a profile x̃ = m̃ − 2Xz lies in span{m̃, u_1..u_3}, for landmarks and for novel objects alike."""
    rng = np.random.default_rng(0)
    L, Z = rng.normal(size=(15, 3)), 5.0 * rng.normal(size=(40, 3))  # arrivals far outside the landmarks too
    check = profile_check(fit_model(euclidean(L, L), n_components=2))
    assert check.basis.shape[1] == 4 and check.reference == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(check.shares(euclidean(Z, L)), 1.0, atol=1e-10)
    assert check.consistency(1.0) == pytest.approx(1.0)
    assert check.usable


def test_the_basis_is_orthonormal_and_centred() -> None:
    rng = np.random.default_rng(1)
    L = rng.normal(size=(30, 8))
    check = profile_check(fit_model(euclidean(L, L), n_components=2))
    Q = check.basis
    assert Q.shape == (30, PROFILE_AXES + 1)
    np.testing.assert_allclose(Q.T @ Q, np.eye(Q.shape[1]), atol=1e-12)
    np.testing.assert_allclose(Q.sum(axis=0), 0.0, atol=1e-12)


def test_a_similarity_model_scores_its_rows_as_the_distance_model_scores_the_same_objects() -> None:
    """A linear kernel's distances are the Euclidean ones: the same shares, from similarity rows."""
    rng = np.random.default_rng(2)
    L, Z = rng.normal(size=(20, 6)), rng.normal(size=(25, 6))
    by_distance = profile_check(LandmarkMDS().fit_features(L).model_)
    sim = LandmarkMDS(input="similarity").fit_features(L, metric="linear")
    by_kernel = profile_check(sim.model_)
    rows = sim.dissimilarities_to_landmarks(Z)  # (m, n + 1): k(z, l_i), then k(z, z)
    np.testing.assert_allclose(by_kernel.shares(rows), by_distance.shares(euclidean(Z, L)), atol=1e-9)
    assert by_kernel.reference == pytest.approx(by_distance.reference, abs=1e-9)


def test_landmarks_that_are_all_alike_cannot_be_checked() -> None:
    """A regular simplex: every landmark row is the same up to order, so no order can be told from another."""
    n = 9
    D = 1.0 - np.eye(n)
    check = profile_check(fit_model(D, n_components=2))
    assert check is not None and not check.usable


@pytest.mark.slow
def test_a_geodesic_model_is_checked_on_the_raw_rows() -> None:
    """Geodesic paths make any row look like a path through some landmarks; the raw rows still tell (digits)."""
    s = setting("digits", 60)
    L = s.landmarks
    D = matrix("digits")
    check = profile_check(fit_model(D[np.ix_(L, L)], n_components=2, geodesic_neighbors=10))
    assert _c(check, s.rows["model order"]) > 0.8
    assert _c(check, s.rows["shuffled"]) < 0.2 and _c(check, s.rows["reversed"]) < 0.2


# ----------------------------------------------------------------- real data


def _c(check, rows: np.ndarray) -> float:
    return check.consistency(float(np.nanmean(check.shares(rows))))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["digits", "docstrings"])
@pytest.mark.parametrize("selection", ["random", "maxmin"])
def test_on_real_data_rows_in_model_order_read_one_and_every_mixup_reads_near_zero(name: str, selection: str) -> None:
    """Digits (Euclidean) and stdlib docstrings (normalised edit distance, non-Euclidean), 100 landmarks.

    Measured (benchmarks/bench_consistency.py, n = 50–200, 3 landmark draws): model order 0.91–1.47; mix-ups
    −0.16–0.22; at n = 100: mix-ups −0.03–0.20.
    """
    s = setting(name, 100, selection)
    check = profile_check(s.model)
    assert check.usable
    assert _c(check, s.rows["model order"]) > 0.8
    for case in MIXUPS:
        assert abs(_c(check, s.rows[case])) < 0.25, case
