"""Eigensolvers that compute only the eigenpairs a caller needs (docs/math.md §1).

Two needs, two solvers, both exact to round-off:

* ``top_eigenpairs(B, k)``: the k largest eigenpairs of a symmetric B, for
  callers that use only the top d of a kernel (scoring candidate landmark
  sets, the best d-plane of a sample). LAPACK's subset solver below
  ``SUBSET_MAX_N`` rows (it still reduces B to tridiagonal form, O(n³), but
  at that size it is a millisecond), ARPACK's Lanczos above (docs/performance.md:
  at n = 1,000 one BLAS thread, top 10: 12–29 ms against 130–230 ms for every
  eigenpair).
* ``low_rank_eigh(B, tol)``: every eigenvalue of B outside [-tol, tol] with its
  eigenvector, when there are few of them (Euclidean landmarks from
  low-dimensional data: the kernel's rank is the data's dimension + 0), or
  None. A seeded Gaussian block of ``LOW_RANK_BLOCK`` vectors spans B's range
  after one product when the rank is below it; Rayleigh–Ritz on that range
  gives the eigenpairs, and a residual *certificate* proves that nothing was
  missed: with Q the orthonormal basis, E = (I − QQᵀ)BQ and
  R = (I − QQᵀ)B(I − QQᵀ) formed explicitly, Weyl's inequality puts every
  eigenvalue of B within ‖E‖₂ of a Ritz value or within ‖E‖₂ + ‖R‖₂ of 0.
  The result is accepted only when ‖E‖_F is at the round-off of a float64
  eigensolver and ‖E‖_F + ‖R‖_F ≤ tol / 2, so the eigenvalues it reports are
  exactly those a full solver counts as nonzero, to round-off, and the
  negative share computed from them is the full solver's. Otherwise (a
  kernel of high rank, or with eigenvalues between round-off and the block's
  cut) it returns None after one or two block products, and the caller runs
  the full ``eigh``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SUBSET_MAX_N", "LOW_RANK_BLOCK", "LOW_RANK_MIN_N", "arpack_start", "top_eigenpairs", "top_eigenvalues",
           "low_rank_eigh"]

#: Up to this many rows LAPACK's subset solver finds the top eigenpairs fastest (measured: 0.6 ms at n = 100,
#: as fast as ARPACK at 150–200, 2–4× slower from 500 on).
SUBSET_MAX_N = 160
#: Vectors of ``low_rank_eigh``'s block: kernels of rank up to about this are solved without the full ``eigh``.
LOW_RANK_BLOCK = 64
#: Below this many rows the full ``eigh`` costs a few milliseconds: ``low_rank_eigh`` is not tried.
LOW_RANK_MIN_N = 256
#: ``low_rank_eigh`` accepts a Ritz basis whose residual ‖(I − QQᵀ)BQ‖_F is at most this many float64 ulps
#: of λ_max per row (about what LAPACK's own backward error is).
RITZ_ULPS_PER_ROW = 10.0
_EPS = float(np.finfo(np.float64).eps)


def arpack_start(n: int) -> np.ndarray:
    """ARPACK's start vector for an (n, n) double-centred kernel: fixed, so results are reproducible.

    The ones vector lies in such a kernel's null space, hence the deterministic jitter.
    """
    return np.ones(n) / np.sqrt(n) + 1e-3 * np.cos(np.arange(n) * 0.7548776662466927)


def top_eigenpairs(B: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest eigenvalues of symmetric B (n, n), descending, and their eigenvectors (n, k).

    Exact to round-off (ARPACK runs to machine precision, ``tol=0``); k is
    capped at n. Kernels of rank below k converge more slowly (the zero
    eigenvalues cluster) but still converge; a run that does not is repeated
    by LAPACK.
    """
    n = B.shape[0]
    k = max(1, min(int(k), n))
    if n > SUBSET_MAX_N and k < n // 4:
        import scipy.sparse.linalg  # lazily: keeps `streamembed embed`'s start-up short

        try:
            w, V = scipy.sparse.linalg.eigsh(B, k=k, which="LA", v0=arpack_start(n), tol=0.0,
                                             ncv=min(n, max(2 * k + 1, 32)), maxiter=20 * n)
        except (scipy.sparse.linalg.ArpackNoConvergence, scipy.sparse.linalg.ArpackError):
            pass
        else:
            order = np.argsort(w)[::-1]
            return w[order], V[:, order]
    import scipy.linalg

    w, V = scipy.linalg.eigh(B, subset_by_index=[n - k, n - 1], check_finite=False)
    return w[::-1], V[:, ::-1]


def top_eigenvalues(B: np.ndarray, k: int) -> np.ndarray:
    """The k largest eigenvalues of symmetric B (n, n), descending (``top_eigenpairs`` without the vectors)."""
    n = B.shape[0]
    k = max(1, min(int(k), n))
    if n > SUBSET_MAX_N and k < n // 4:
        import scipy.sparse.linalg

        try:
            w = scipy.sparse.linalg.eigsh(B, k=k, which="LA", v0=arpack_start(n), tol=0.0,
                                          ncv=min(n, max(2 * k + 1, 32)), maxiter=20 * n, return_eigenvectors=False)
        except (scipy.sparse.linalg.ArpackNoConvergence, scipy.sparse.linalg.ArpackError):
            pass
        else:
            return np.sort(w)[::-1]
    import scipy.linalg

    return scipy.linalg.eigh(B, eigvals_only=True, subset_by_index=[n - k, n - 1], check_finite=False)[::-1]


def _orthonormal_range(Y: np.ndarray) -> np.ndarray:
    """An orthonormal basis (n, q) of Y's numerical column space (Gram eigendecomposition, twice: BLAS-3 only;
    directions below 1e-12 of the largest squared singular value per column are dropped)."""
    for _ in range(2):
        s, V = np.linalg.eigh(Y.T @ Y)
        keep = s > max(s[-1], 0.0) * 1e-12 * Y.shape[1]
        Y = Y @ (V[:, keep] / np.sqrt(s[keep]))
    return Y


def low_rank_eigh(B: np.ndarray, tol_rel: float, block: int = LOW_RANK_BLOCK,
                  rounds: int = 2) -> tuple[np.ndarray, np.ndarray] | None:
    """Every eigenpair of symmetric B (n, n) with |λ| > tol = tol_rel·λ_max, certified (module docstring), or None.

    Args:
        B: the (double-centred) kernel, float64.
        tol_rel: eigenvalues within ±tol_rel·λ_max count as zero (``cmds.positive_tolerance`` of λ_max = 1).
        block: vectors of the range finder; a kernel with more eigenvalues beyond tol gives None.
        rounds: block products tried before giving up.
    Returns:
        (eigenvalues (q,) descending, eigenvectors (n, q)) of every eigenvalue the basis captured (|λ| ≤ tol
        ones among them too), or None when the certificate does not hold.
    """
    n = B.shape[0]
    b = min(int(block), n // 4)
    if b < 1:
        return None
    Y = B @ np.random.default_rng(0).standard_normal((n, b))
    for _ in range(rounds):
        Q = _orthonormal_range(Y)
        if Q.shape[1] >= b:  # the block is full: B has at least b significant directions
            return None
        W = B @ Q
        T = Q.T @ W
        theta, S = np.linalg.eigh(0.5 * (T + T.T))
        lam_max = float(np.abs(theta).max(initial=0.0))
        tol = tol_rel * float(theta.max(initial=0.0))
        E = W - Q @ T
        e = float(np.sqrt(np.einsum("ij,ij->", E, E)))
        R = B - W @ Q.T
        R -= Q @ E.T
        r = float(np.sqrt(np.einsum("ij,ij->", R, R)))
        if e <= RITZ_ULPS_PER_ROW * max(n, 100) * _EPS * lam_max and e + r <= 0.5 * tol:
            order = np.argsort(theta)[::-1]
            return theta[order], Q @ S[:, order]
        Y = W
    return None
