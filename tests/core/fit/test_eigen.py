"""core.fit.eigen: the top eigenpairs and the certified low-rank spectrum equal LAPACK's full ``eigh`` to round-off."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from streamembed.core.fit import cmds, eigen
from streamembed.core.runtime import single_blas_thread
from benchmarks.datasets import english_words


def _kernel(D: np.ndarray) -> np.ndarray:
    return cmds.double_center(np.square(D))[0]


def _euclidean(rng: np.random.Generator, n: int, p: int) -> np.ndarray:
    X = rng.normal(size=(n, p)) * np.linspace(3.0, 0.5, p)
    D = np.sqrt(np.maximum(((X[:, None] - X[None]) ** 2).sum(-1), 0.0))
    return 0.5 * (D + D.T)


@pytest.fixture(scope="module")
def words() -> np.ndarray:
    return english_words(n=240).D


def _reference(B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with single_blas_thread():
        w, V = scipy.linalg.eigh(B)
    return w[::-1], V[:, ::-1]


@pytest.mark.parametrize("n", [60, 240])  # LAPACK's subset solver, then ARPACK
def test_top_eigenpairs_equal_the_full_solvers_top_k(rng: np.random.Generator, words: np.ndarray, n: int) -> None:
    for B in (_kernel(_euclidean(rng, n, 30)), _kernel(words[:n, :n])):
        w, V = eigen.top_eigenpairs(B, 10)
        w_ref, V_ref = _reference(B)
        assert np.abs(w - w_ref[:10]).max() <= 1e-12 * w_ref[0]
        np.testing.assert_allclose(np.abs((V * V_ref[:, :10]).sum(axis=0)), 1.0, atol=1e-9)  # same vectors up to sign


def test_top_eigenpairs_of_a_kernel_of_lower_rank_than_k_still_converge(rng: np.random.Generator) -> None:
    B = _kernel(_euclidean(rng, 300, 3))
    w, _ = eigen.top_eigenpairs(B, 10)
    w_ref, _ = _reference(B)
    assert np.abs(w - w_ref[:10]).max() <= 1e-11 * w_ref[0] and w[3] <= 1e-10 * w[0]


def test_low_rank_eigh_finds_every_eigenpair_of_a_low_rank_kernel(rng: np.random.Generator) -> None:
    B = _kernel(_euclidean(rng, 300, 20))
    found = eigen.low_rank_eigh(B, cmds.positive_tolerance(1.0, 300, np.dtype(np.float64)))
    assert found is not None
    w, V = found
    w_ref, V_ref = _reference(B)
    assert (w > 1e-9 * w[0]).sum() == 20
    assert np.abs(w[:20] - w_ref[:20]).max() <= 1e-12 * w_ref[0]
    np.testing.assert_allclose(np.abs((V[:, :20] * V_ref[:, :20]).sum(axis=0)), 1.0, atol=1e-9)


def test_low_rank_eigh_refuses_kernels_it_cannot_certify(rng: np.random.Generator, words: np.ndarray) -> None:
    tol = cmds.positive_tolerance(1.0, 240, np.dtype(np.float64))
    assert eigen.low_rank_eigh(_kernel(words), tol) is None  # edit distances: full rank
    assert eigen.low_rank_eigh(_kernel(_euclidean(rng, 300, 200)), tol) is None  # more directions than the block
    # rank 20 plus eigenvalues far above round-off but below the range finder's cut: not certified
    D = _euclidean(rng, 300, 20)
    B = _kernel(D)
    noise = rng.normal(size=(300, 3))
    noise -= noise.mean(axis=0)
    B_noisy = B + 1e-9 * np.abs(_reference(B)[0][0]) * (noise @ noise.T) / 300
    assert eigen.low_rank_eigh(B_noisy, tol) is None


def _pseudo_euclidean(rng: np.random.Generator, n: int) -> np.ndarray:
    """Distances with squares ‖x_i − x_j‖² − ‖y_i − y_j‖² (x in R^8, y in R^2, small): non-Euclidean, rank 10."""
    X = rng.normal(size=(n, 8)) * 3.0
    Y = rng.normal(size=(n, 2)) * 0.3
    D2 = ((X[:, None] - X[None]) ** 2).sum(-1) - ((Y[:, None] - Y[None]) ** 2).sum(-1)
    assert D2[~np.eye(n, dtype=bool)].min() > 0
    np.fill_diagonal(D2, 0.0)
    return np.sqrt(0.5 * (D2 + D2.T))


@pytest.mark.parametrize("data", ["euclidean", "pseudo-euclidean"])
def test_the_default_fit_of_a_low_rank_kernel_is_the_full_solvers_fit(rng: np.random.Generator, data: str) -> None:
    D = _euclidean(rng, 500, 25) if data == "euclidean" else _pseudo_euclidean(rng, 500)
    auto, whole = cmds.fit_spectrum_eigh(D, None, "auto", np.dtype(np.float64), 5)
    full = cmds.fit_spectrum(D, None, "full", np.dtype(np.float64), 5)
    assert whole is None  # the certified low-rank path ran, not LAPACK's
    assert auto.exact and auto.rank == full.rank
    np.testing.assert_allclose(auto.eigenvalues, full.eigenvalues, rtol=1e-12, atol=1e-12 * full.eigenvalues[0])
    np.testing.assert_allclose(auto.eigenvectors, full.eigenvectors, atol=1e-9)  # signs are fixed by one rule
    assert auto.negative_share == pytest.approx(full.negative_share, rel=1e-10, abs=1e-15)
    assert (auto.negative_share > cmds.NEGATIVE_SHARE_TOL) == (data == "pseudo-euclidean")
    assert abs(auto.next_eigenvalue - full.next_eigenvalue) <= 1e-12 * full.eigenvalues[0]
