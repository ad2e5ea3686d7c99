"""Bad input: a ValueError naming the problem and the offending shape or index."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import InputError, LandmarkMDS, NotFittedError

from ..conftest import euclidean


@pytest.fixture
def D(rng):
    P = rng.normal(size=(6, 3))
    return euclidean(P, P)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda D: D[:, :5], r"must be square, got shape \(6, 5\)"),
        (lambda D: D + np.eye(6), r"zero diagonal: D\[0, 0\]"),
        (lambda D: np.where(np.arange(36).reshape(6, 6) == 1, D + 1, D), r"symmetric: D\[0, 1\]"),
        (lambda D: np.where(np.eye(6, k=2) + np.eye(6, k=-2) > 0, -1.0, D), r"negative dissimilarity: D\[0, 2\]"),
        (lambda D: np.where(np.eye(6, k=1) + np.eye(6, k=-1) > 0, np.nan, D),
         r"contains NaN or infinity: D\[0, 1\] = nan"),
        (lambda D: np.where(np.eye(6, k=3) + np.eye(6, k=-3) > 0, np.inf, D),
         r"contains NaN or infinity: D\[0, 3\] = inf"),
        (lambda D: D[0], r"must be 2-dimensional, got shape \(6,\)"),
        (lambda D: D.astype(str), r"must be numeric"),
    ],
)
def test_bad_landmark_matrix_is_refused(D, mutate, message):
    with pytest.raises(ValueError, match=message):
        LandmarkMDS(n_components=2).fit(mutate(D))


def test_too_many_components(D):
    with pytest.raises(InputError, match=r"n_components=9 exceeds the \d+ positive eigenvalues"):
        LandmarkMDS(n_components=9).fit(D)


def test_a_partial_solver_refusal_names_its_truncation_not_a_count_of_positive_eigenvalues():
    # 300 landmarks in R^120 have 120 positive eigenvalues; the partial solver computes the top 64 by
    # default, and d = 100 used to be refused as exceeding "the 64 positive eigenvalues"
    P = np.random.default_rng(0).normal(size=(300, 120))
    D300 = np.linalg.norm(P[:, None] - P[None], axis=-1)
    with pytest.raises(InputError) as exc:
        LandmarkMDS(n_components=100, eigensolver="partial").fit(D300)
    assert "64 positive eigenvalues" not in str(exc.value)
    assert "the 64 eigenpairs the partial eigensolver computed" in str(exc.value)
    assert "n_residual_components >= 100 or eigensolver='full'" in str(exc.value)
    est = LandmarkMDS(n_components=100, eigensolver="partial", n_residual_components=120).fit(D300)
    assert est.model_.eigenvalues.size == 100
    # a kernel that has fewer positive eigenvalues than computed: that count is right, and said so
    with pytest.raises(InputError,
                       match=r"exceeds the 3 positive eigenvalues the partial eigensolver found among the top 64"):
        LandmarkMDS(n_components=5, eigensolver="partial").fit(np.linalg.norm(P[:, None, :3] - P[None, :, :3], axis=-1))


def test_bad_parameters(D):
    with pytest.raises(InputError, match="method must be one of"):
        LandmarkMDS(method="nope").fit(D)
    with pytest.raises(InputError, match="n_components must be a positive integer"):
        LandmarkMDS(n_components=0).fit(D)


def test_not_fitted():
    with pytest.raises(NotFittedError, match="not fitted"):
        LandmarkMDS().transform(np.zeros((1, 3)))


def test_wrong_row_length_names_both_shapes(D):
    est = LandmarkMDS(n_components=2).fit(D)
    with pytest.raises(InputError, match=r"A has 5 columns but the model has 6 landmarks \(shape \(3, 5\)"):
        est.embed(np.ones((3, 5)))
    with pytest.raises(InputError, match=r"X has 5 features, but LandmarkMDS is expecting 6 features"):
        est.transform(np.ones((3, 5)))


@pytest.mark.parametrize("value, label", [(np.nan, "non_finite"), (np.inf, "non_finite"), (-2.0, "negative")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bad_rows_raise_or_are_masked(D, value, label, dtype):
    est = LandmarkMDS(n_components=2, method="restricted").fit(D)
    A = np.tile(D[:1], (300, 1)).astype(dtype) + 0.5
    A[:, 0] = D[0, 1]
    A[137, 4] = value
    with pytest.raises(InputError, match=rf"row 137 of A is invalid: {label}: A\[4\]"):
        est.embed(A)
    res = est.embed(A, errors="mask")
    assert res.valid.sum() == 299 and not res.valid[137]
    assert res.reasons[137].code == label and str(res.reasons[137]).startswith(label + ":")
    assert np.isnan(res.y[137]).all() and np.isfinite(res.y[np.arange(300) != 137]).all()
    assert all(r is None for i, r in enumerate(res.reasons) if i != 137)


def test_block_cross_must_match_and_be_valid(D):
    est = LandmarkMDS(n_components=2).fit(D)
    A = D[:3] + 1.0
    np.fill_diagonal(A, 1.0)
    with pytest.raises(InputError, match=r"C has shape \(2, 2\) but the block has 3 rows"):
        est.transform_block(A, np.zeros((2, 2)))
    C = np.array([[0, 1, 2], [1, 0, 1], [2.5, 1, 0]])
    with pytest.raises(InputError, match=r"C is not symmetric: C\[0, 2\] = 2.0 but C\[2, 0\] = 2.5"):
        est.transform_block(A, C)
    res = est.embed(A, C, errors="mask")
    assert not res.valid.any() and all(r.code == "bad_block" for r in res.reasons)


def test_nothing_is_clipped_silently(D):
    est = LandmarkMDS(n_components=2).fit(D)
    A = D[:2].copy()
    A[1, 2] = -1e-12
    with pytest.raises(InputError, match="negative"):
        est.transform(A)
