"""Classical MDS of the landmarks (docs/math.md §1).

``fit_spectrum`` turns an (n, n) landmark dissimilarity matrix into everything
later stages need: the positive eigenpairs of the double-centred kernel
``B = -1/2 P Δ2 P``, the row means of Δ2 and its grand mean. Nothing here
depends on how many dimensions the map keeps: that is the estimator's choice
of the first d eigenpairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..runtime import single_blas_thread
from .eigen import LOW_RANK_MIN_N, low_rank_eigh, top_eigenpairs

#: Below this share of negative eigen-energy the landmarks count as Euclidean (round-off).
NEGATIVE_SHARE_TOL = 1e-9
#: Non-Euclidean landmarks: eigenpairs with λ_j < SPECTRUM_FLOOR·λ_1 are not kept for monitoring
#: (docs/math.md §4.3): their eigenvectors are set by the non-Euclidean part of the kernel, and
#: c_j²/λ_j on them would dominate k̂(z,z) — and k0 — of ordinary arrivals.
SPECTRUM_FLOOR = 1e-2

#: Above this many landmarks a partial eigensolver replaces the full ``eigh``
#: (docs/performance.md: full eigh of n = 2000 takes 0.58 s, eigsh of the top 10 0.11 s).
FULL_EIGH_MAX_N = 1500
# the default input dtype (a module-level value: argument defaults are evaluated once)
_FLOAT64 = np.dtype(np.float64)


@dataclass(frozen=True)
class LandmarkSpectrum:
    """The landmark kernel's spectrum and centring constants.

    Attributes:
        eigenvalues: (r,) positive eigenvalues of B, descending (squared distance units): every
            positive one (Euclidean landmarks), or those at or above the floor
            ``SPECTRUM_FLOOR``·λ_1 (non-Euclidean landmarks; never fewer than d).
        eigenvectors: (n, r) orthonormal eigenvectors, sign fixed so that the
            largest-magnitude entry of each column is positive.
        row_means: (n,) row means m_Δ of the squared dissimilarities Δ2.
        grand_mean: g = mean(Δ2).
        negative_share: Σ|λ_neg| / Σ|λ| (0 for Euclidean Δ); a lower bound
            when ``exact`` is False.
        exact: True when the full spectrum was computed, so ``eigenvalues``
            holds every positive eigenvalue (above the floor) and ``negative_share`` is exact.
        next_eigenvalue: λ_{r+1}, the largest eigenvalue not kept (≤ 0 when every positive
            one is kept; NaN when unknown: a model file, or the partial solver's last one).
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    row_means: np.ndarray
    grand_mean: float
    negative_share: float
    exact: bool
    next_eigenvalue: float = float("nan")

    @property
    def n_landmarks(self) -> int:
        return int(self.eigenvectors.shape[0])

    @property
    def rank(self) -> int:
        return int(self.eigenvalues.shape[0])


def double_center(D2: np.ndarray, overwrite: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """B = -1/2 P Δ2 P with P = I - eeᵀ/n; returns (B, row_means, grand_mean).

    With ``overwrite`` the (n, n) Δ2 buffer becomes B (no second n×n array).
    """
    row_means = D2.mean(axis=1)
    grand_mean = float(row_means.mean())
    B = D2 if overwrite else D2.copy()
    B -= row_means[:, None]
    B -= row_means[None, :]
    B += grand_mean
    B *= -0.5
    return B, row_means, grand_mean


def _fix_signs(vectors: np.ndarray) -> np.ndarray:
    idx = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[idx, np.arange(vectors.shape[1])])
    signs[signs == 0] = 1.0
    return vectors * signs


def positive_tolerance(lambda_max: float, n: int, dtype: np.dtype) -> float:
    """Eigenvalues at or below this are numerically zero, not positive.

    Round-off in B's eigenvalues is about n·eps·λ_max of the input's precision;
    keeping such an eigenvalue would divide by noise in k̂ (docs/math.md §4).
    """
    return 10.0 * max(n, 100) * float(np.finfo(dtype).eps) * max(lambda_max, 0.0)


def fit_spectrum(
    D: np.ndarray,
    n_residual: int | None = None,
    solver: str = "auto",
    input_dtype: np.dtype = np.dtype(np.float64),  # noqa: B008 - an immutable value
    n_components: int = 10,
) -> LandmarkSpectrum:
    """Classical MDS spectrum of validated dissimilarities D (n, n), float64.

    Args:
        D: landmark dissimilarities (not squared), already validated.
        n_residual: how many eigenpairs to keep (r). None keeps every positive
            eigenvalue when the full solver runs, else ``default_partial_rank(n)``;
            for non-Euclidean landmarks only those at or above ``SPECTRUM_FLOOR``·λ_1
            (``monitored_rank``).
        solver: "full" (LAPACK eigh), "partial" (randomized subspace iteration, top r) or "auto"
            (the full spectrum up to ``FULL_EIGH_MAX_N`` landmarks: LAPACK's, or for a kernel of low
            rank the certified ``eigen.low_rank_eigh``, which finds the same eigenpairs to round-off).
        input_dtype: precision the dissimilarities were given in (sets the
            tolerance below which an eigenvalue counts as zero).
        n_components: d; the partial solver computes these top eigenpairs to
            full accuracy (Lanczos) and the rest of the r only approximately.
    """
    return fit_spectrum_eigh(D, n_residual, solver, input_dtype, n_components)[0]


def fit_spectrum_eigh(
    D: np.ndarray,
    n_residual: int | None = None,
    solver: str = "auto",
    input_dtype: np.dtype = _FLOAT64,
    n_components: int = 10,
) -> tuple[LandmarkSpectrum, tuple[np.ndarray, np.ndarray] | None]:
    """``fit_spectrum``, and B's whole eigendecomposition (w (n,) descending, V (n, n)) when LAPACK's full
    solver computed it (None otherwise): the leave-one-out calibration (``monitor.calibration``) reuses it.

    The solvers run on one BLAS thread (``runtime.single_blas_thread``): on the two shared cores of the
    development machine a second thread made a full ``eigh`` of 1,500 landmarks 2–4× slower, not faster,
    whenever anything else ran (docs/performance.md).
    """
    import scipy.linalg
    import scipy.sparse.linalg  # noqa: F401

    with single_blas_thread():
        return _fit_spectrum_eigh(D, n_residual, solver, input_dtype, n_components)


def _fit_spectrum_eigh(D: np.ndarray, n_residual: int | None, solver: str, input_dtype: np.dtype,
                       n_components: int) -> tuple[LandmarkSpectrum, tuple[np.ndarray, np.ndarray] | None]:
    n = D.shape[0]
    B, row_means, grand_mean = double_center(np.square(D), overwrite=True)
    requested = solver
    if solver == "auto":
        solver = "full" if (n <= FULL_EIGH_MAX_N or (n_residual is not None and n_residual > n // 4)) else "partial"
    whole: tuple[np.ndarray, np.ndarray] | None = None
    if solver == "full":
        found = None
        if requested == "auto" and n >= LOW_RANK_MIN_N:
            found = low_rank_eigh(B, positive_tolerance(1.0, n, input_dtype))
        if found is None:
            import scipy.linalg  # lazily: `embed` and `run` load fitted models and never solve

            w, V = scipy.linalg.eigh(B, overwrite_a=False, check_finite=False)
            w, V = w[::-1], V[:, ::-1]
            whole = (w, V)
        else:
            w, V = found
        tol = positive_tolerance(float(w[0]), n, input_dtype)
        neg_abs = float(np.abs(w[w < -tol]).sum())
        total = float(np.abs(w[np.abs(w) > tol]).sum())
        negative_share = neg_abs / total if total > 0 else 0.0
        r = monitored_rank(w, tol, negative_share, n_components)
        r = r if n_residual is None else min(int(n_residual), r)
        values, vectors, exact = w[:r], V[:, :r], True
        # the eigenvalues low_rank_eigh did not capture are certified within ±tol/2 of 0
        nxt = float(w[r]) if w.shape[0] > r else float("nan")
        if found is not None and w.shape[0] < n and not nxt >= -tol:
            nxt = 0.0
    elif solver == "partial":
        k = default_partial_rank(n) if n_residual is None else int(n_residual)
        if not 1 <= k < n - 1:
            raise InputError(f"the partial eigensolver needs 1 <= n_residual < n - 1 = {n - 1}, got {k}")
        w, V = partial_eigh(B, min(n_components, k), k)
        tol = positive_tolerance(float(w[0]), n, input_dtype)
        negative_share = _negative_share_lower_bound(B, w[w > tol], tol)
        r = monitored_rank(w, tol, negative_share, n_components)
        values, vectors, exact = w[:r], V[:, :r], False
        nxt = float(w[r]) if w.shape[0] > r else float("nan")
    else:
        raise InputError(f"solver must be 'auto', 'full' or 'partial', got {solver!r}")
    if values.size == 0:
        raise InputError("the landmark kernel has no positive eigenvalue: all landmarks coincide")
    spectrum = LandmarkSpectrum(
        eigenvalues=np.ascontiguousarray(values),
        eigenvectors=np.ascontiguousarray(_fix_signs(vectors)),
        row_means=row_means,
        grand_mean=grand_mean,
        negative_share=float(negative_share),
        exact=exact,
        next_eigenvalue=nxt,
    )
    return spectrum, whole


def top_spectrum(D: np.ndarray, n_components: int) -> LandmarkSpectrum | None:
    """The top d = ``n_components`` eigenpairs of D's classical MDS (n, n), or None when fewer than d are positive.

    What placing by projection on a d-dimensional map needs and no more (``eigen.top_eigenpairs``): the scores
    of candidate landmark sets (``refit.strategies.captured_variance``, ``refit.policy``). ``negative_share`` is
    not computed (0), ``exact`` is False.
    """
    n = D.shape[0]
    d = int(n_components)
    if d > n - 1:
        return None
    B, row_means, grand_mean = double_center(np.square(D), overwrite=True)
    import scipy.sparse.linalg  # noqa: F401 - loaded (with scipy's OpenBLAS) before the guard, which then limits it

    with single_blas_thread():
        w, V = top_eigenpairs(B, d)
    if not float(w[-1]) > positive_tolerance(float(w[0]), n, _FLOAT64):
        return None
    return LandmarkSpectrum(eigenvalues=np.ascontiguousarray(w), eigenvectors=np.ascontiguousarray(_fix_signs(V)),
                            row_means=row_means, grand_mean=grand_mean, negative_share=0.0, exact=False)


def monitored_rank(w: np.ndarray, tol: float, negative_share: float, n_components: int) -> int:
    """How many of the descending eigenvalues ``w`` to keep: those above round-off ``tol``; for
    non-Euclidean landmarks (``negative_share`` > NEGATIVE_SHARE_TOL) only those ≥ SPECTRUM_FLOOR·λ_1,
    but never fewer than the map's d (when that many are positive)."""
    positive = int((w > tol).sum())
    if negative_share <= NEGATIVE_SHARE_TOL or positive == 0:
        return positive
    kept = int((w[:positive] >= SPECTRUM_FLOOR * float(w[0])).sum())
    return min(positive, max(kept, int(n_components)))


def default_partial_rank(n: int) -> int:
    """Eigenpairs kept for monitoring with the partial solver (a documented truncation)."""
    return max(1, min(n // 4, 64))


def partial_eigh(B: np.ndarray, d: int, k: int, rtol: float = 1e-10,
                 max_iterations: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Top-k eigenpairs of symmetric B: the top d to full accuracy, the rest approximately.

    Block subspace iteration with Rayleigh–Ritz on k + 10 vectors from a
    seeded Gaussian start: each round reads B once for the whole block
    (BLAS-3), where Lanczos reads it once per vector, and it does not stall
    when k exceeds B's numerical rank (extra Ritz values come out as zeros
    and are discarded as non-positive). It stops when every one of the top d
    Ritz pairs has a residual ‖B u - θ u‖ ≤ rtol·θ_1; if that has not happened
    after ``max_iterations`` rounds (a flat spectrum), ARPACK's Lanczos
    computes the top d instead and the subspace supplies the rest.

    Returns: (eigenvalues (k',) descending, eigenvectors (n, k')), k' ≤ k.
    """
    n = B.shape[0]
    p = min(n, k + 10)
    rng = np.random.default_rng(0)
    Q = _orthonormalize(B @ rng.standard_normal((n, p)))
    w: np.ndarray | None = None
    V: np.ndarray | None = None
    for _ in range(max_iterations):
        BQ = B @ Q
        T = Q.T @ BQ
        theta, S = np.linalg.eigh(0.5 * (T + T.T))
        order = np.argsort(theta)[::-1]
        theta, S = theta[order], S[:, order]
        top = min(d, theta.size)
        U = Q @ S[:, :top]
        resid = np.linalg.norm(BQ @ S[:, :top] - U * theta[:top], axis=0)
        if (resid <= rtol * max(theta[0], 0.0)).all():
            w, V = theta[:k], Q @ S[:, :k]
            break
        Q = _orthonormalize(BQ)
    if w is None:
        import scipy.sparse.linalg  # lazily: keeps `streamembed embed`'s start-up short

        try:
            wd, Vd = scipy.sparse.linalg.eigsh(B, k=d, which="LA", v0=_v0(n), tol=0.0, maxiter=20 * n)
        except scipy.sparse.linalg.ArpackNoConvergence:
            return theta[:k], Q @ S[:, :k]
        order = np.argsort(wd)[::-1]
        wd, Vd = wd[order], Vd[:, order]
        # the rest of the subspace, orthogonal to the exact top d
        R = _orthonormalize(Q - Vd @ (Vd.T @ Q))
        T = R.T @ B @ R
        w2, V2 = np.linalg.eigh(0.5 * (T + T.T))
        order = np.argsort(w2)[::-1][: max(k - d, 0)]
        w, V = np.concatenate([wd, w2[order]]), np.hstack([Vd, R @ V2[:, order]])
    assert V is not None  # set with w
    return w, V


def _v0(n: int) -> np.ndarray:
    # A fixed ARPACK start vector makes fits reproducible. The ones vector lies
    # in B's null space, hence the deterministic jitter.
    return np.ones(n) / np.sqrt(n) + 1e-3 * np.cos(np.arange(n) * 0.7548776662466927)


def _orthonormalize(Y: np.ndarray) -> np.ndarray:
    """An orthonormal basis of Y's numerical column space, by Gram eigendecomposition twice.

    Only BLAS-3 products and a small p×p eigh: LAPACK's Householder QR of a
    tall matrix runs 7× slower than this on the multithreaded OpenBLAS here,
    and the eigen form drops directions beyond Y's numerical rank instead of
    failing on them as Cholesky-QR would.
    """
    for _ in range(2):
        s, V = np.linalg.eigh(Y.T @ Y)
        keep = s > s[-1] * 1e-12 * Y.shape[1]
        Y = Y @ (V[:, keep] / np.sqrt(s[keep]))
    return Y


def _negative_share_lower_bound(B: np.ndarray, positive: np.ndarray, tol: float) -> float:
    """Σ|λ_neg| / Σ|λ| bounded from below by the known positive eigenvalues and the trace.

    With P = Σ positive and N = Σ|negative|, tr(B) = P - N, so N ≥ P_known - tr(B)
    and the share N / (tr + 2N) (increasing in N) is at least its value there.
    (An extra ARPACK run for the most negative eigenvalues does not converge on
    Euclidean data, whose smallest eigenvalues cluster at zero.)
    """
    trace = float(np.trace(B))
    neg = max(0.0, float(positive.sum()) - trace)
    denom = trace + 2.0 * neg
    return neg / denom if denom > 0 else 0.0
