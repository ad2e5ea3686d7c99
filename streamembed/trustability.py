"""Roy's trustability index and the reconstruction behind the consistency index (Roy 2021; docs/math.md §8.1–8.2).

Rows are objects: X (n, p) the input features, Y (n, d) an algorithm's output, d ≤ p; a tilde means
column-centred, ‖·‖ is the Frobenius norm and ‖·‖_* the nuclear norm (sum of singular values).

* :func:`procrustes_residual` — the similarity Procrustes residual of Roy's Appendix A.3,
  min over μ, λ, P of ‖A − 1μᵀ − λ B P‖² = ‖Ã‖² − ‖B̃ᵀÃ‖_*² / ‖B̃‖², P orthogonal acting on the
  columns (A with fewer columns than B is padded with zero columns).
* :func:`trustability_index` — Definition 3: TI = ‖Ỹ‖² − ‖X̃ᵀỸ‖_*² / ‖X̃‖², the residual with A = Y,
  B = X. 0 for PCA and for classical MDS at d = p; in units of Y², so :func:`relative_trustability`,
  TI / ‖Ỹ‖² ∈ [0, 1], is the scale-free form (for PCA at d < p: the share of variance it leaves out).
* :func:`reconstruction` — Theorem 3 as corrected: f(y) = x̄ + βᵀ(k_y(y, y_i) − n⁻¹Σ_j k_y(y_j, y_i))_i with
  a Gaussian k_y of bandwidth h_y (the median distance between rows of Y) and β the minimum-norm solution
  of Aᵀβ = C, A = n⁻¹ K_y H Y, C = n⁻¹ ỸᵀX̃; then Cov(x − f(y), y) = 0 to round-off.

All functions are vectorised numpy/scipy with no I/O; every input problem is an ``InputError`` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core.errors import InputError

__all__ = ["check_features", "check_output", "procrustes_residual", "procrustes_residuals", "trustability_index",
           "relative_trustability", "Reconstruction", "reconstruction", "gaussian_gram", "median_distance"]


def check_features(X: object, what: str = "X") -> np.ndarray:
    """X as an (n, p) float64 matrix the indices can use, or an InputError: fewer than 3 objects, NaN or
    infinite entries, or a constant column (it carries no information and makes the indices undefined)."""
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise InputError(f"{what} must be an (n, p) matrix, got shape {A.shape}")
    if A.shape[0] < 3:
        raise InputError(f"the trustability and consistency indices need at least 3 objects, {what} has "
                         f"{A.shape[0]}")
    if A.shape[1] < 1:
        raise InputError(f"{what} has no columns")
    bad = ~np.isfinite(A)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise InputError(f"{what}[{i}, {j}] = {A[i, j]} is not finite")
    const = np.flatnonzero((A[0] == A).all(axis=0))
    if const.size:
        raise InputError(f"{what} has constant column(s) {const[:10].tolist()}"
                         f"{' ...' if const.size > 10 else ''}: drop them (a constant column carries no "
                         f"information, and a constant output has no scale)")
    return A


def check_output(X: np.ndarray, Y: object, what: str = "Y") -> np.ndarray:
    """An output Y (n, d) of checked features X (n, p): same rows, d ≤ p, checked like X."""
    B = check_features(Y, what)
    if B.shape[0] != X.shape[0]:
        raise InputError(f"{what} has {B.shape[0]} rows, X has {X.shape[0]}: one output row per object")
    if B.shape[1] > X.shape[1]:
        raise InputError(f"{what} has d = {B.shape[1]} columns, more than the p = {X.shape[1]} of X: the indices "
                         f"compare an output with its input for d <= p only")
    return B


def _centred(A: np.ndarray) -> np.ndarray:
    return A - A.mean(axis=-2, keepdims=True)


def procrustes_residuals(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(c,) the similarity Procrustes residuals of a stack A (c, n, a) against one B (n, b), a ≤ b (module doc).

    Round-off below zero is reported as 0. B must not be constant (‖B̃‖ > 0).
    """
    At = _centred(np.asarray(A, dtype=np.float64))
    Bt = _centred(np.asarray(B, dtype=np.float64))
    bb = float(np.einsum("ij,ij->", Bt, Bt))
    if not bb > 0:
        raise InputError("the Procrustes reference is constant: it has no scale to fit")
    M = np.einsum("ni,cnj->cij", Bt, At)  # B̃ᵀÃ for every stacked A: (c, b, a)
    nuclear = np.linalg.svd(M, compute_uv=False).sum(axis=-1)
    res = np.einsum("cij,cij->c", At, At) - nuclear ** 2 / bb
    return np.maximum(res, 0.0)


def procrustes_residual(A: object, B: object) -> float:
    """min over μ (a,), λ real and P orthogonal of ‖A − 1μᵀ − λBP‖², A (n, a), B (n, b), a ≤ b (module doc)."""
    A_ = np.asarray(A, dtype=np.float64)
    B_ = np.asarray(B, dtype=np.float64)
    if A_.ndim != 2 or B_.ndim != 2 or A_.shape[0] != B_.shape[0] or A_.shape[1] > B_.shape[1]:
        raise InputError(f"Procrustes needs A (n, a) and B (n, b) with a <= b, got {A_.shape} and {B_.shape}")
    return float(procrustes_residuals(A_[None], B_)[0])


def trustability_index(X: object, Y: object) -> float:
    """TI of the output Y (n, d) of features X (n, p), d ≤ p: Roy's Definition 3, unnormalised (Y² units).

    Table 1 of Roy (2021) reports n⁻¹TI of the algorithm asked for d = p outputs. Raises InputError for
    fewer than 3 objects, NaN, constant columns or d > p.
    """
    Xc = check_features(X)
    return procrustes_residual(check_output(Xc, Y), Xc)


def relative_trustability(X: object, Y: object) -> float:
    """TI / ‖Ỹ‖² ∈ [0, 1]: the trustability index without Y's units (0: Y is a similarity transform of X)."""
    Xc = check_features(X)
    Yc = check_output(Xc, Y)
    Yt = _centred(Yc)
    return procrustes_residual(Yc, Xc) / float(np.einsum("ij,ij->", Yt, Yt))


def median_distance(A: np.ndarray) -> float:
    """The median Euclidean distance between the rows of A (n, q), over the n(n − 1)/2 pairs."""
    import scipy.spatial.distance

    return float(np.median(scipy.spatial.distance.pdist(A)))


def gaussian_gram(A: np.ndarray, B: np.ndarray, h: float) -> np.ndarray:
    """(m, n) exp(−‖a_r − b_i‖² / 2h²) between the rows of A (m, q) and B (n, q)."""
    import scipy.spatial.distance

    return np.exp(scipy.spatial.distance.cdist(A, B, "sqeuclidean") * (-0.5 / (h * h)))


@dataclass(frozen=True)
class Reconstruction:
    """Theorem 3's reconstruction f of X from Y (module docstring), fitted on n objects.

    Attributes:
        X_hat: (n, p) f(y_i) of the fitted objects.
        beta: (n, p) the coefficients β.
        bandwidth: h_y, the median distance between rows of Y.
        Y: (n, d) the outputs it was fitted on; x_mean (p,) the mean of X; k_mean (n,) the column means of K_y.
    """

    X_hat: np.ndarray
    beta: np.ndarray
    bandwidth: float
    Y: np.ndarray
    x_mean: np.ndarray
    k_mean: np.ndarray

    def __call__(self, Y_new: object) -> np.ndarray:
        """(m, p) f(y) of new outputs Y_new (m, d)."""
        Yn = np.asarray(Y_new, dtype=np.float64)
        if Yn.ndim != 2 or Yn.shape[1] != self.Y.shape[1]:
            raise InputError(f"the reconstruction takes outputs (m, {self.Y.shape[1]}), got {Yn.shape}")
        K = gaussian_gram(Yn, self.Y, self.bandwidth)
        return self.x_mean + (K - self.k_mean) @ self.beta


def reconstruction(X: object, Y: object) -> Reconstruction:
    """Theorem 3's reconstruction of X (n, p) from its output Y (n, d), as corrected (docs/math.md §8.2).

    Raises InputError for unusable inputs (``check_features``, ``check_output``) or when every pair of
    outputs coincides (no bandwidth).
    """
    Xc = check_features(X)
    Yc = check_output(Xc, Y)
    n = Xc.shape[0]
    h = median_distance(Yc)
    if not h > 0:
        raise InputError("more than half of the output pairs coincide (median distance 0): no kernel bandwidth")
    K = gaussian_gram(Yc, Yc, h)
    Yt = _centred(Yc)
    A = K @ Yt / n  # n⁻¹ K_y H Y: H Y is the centred Y
    C = Yt.T @ _centred(Xc) / n  # (d, p): C_jl = cov(y_j, x_l)
    beta = np.linalg.lstsq(A.T, C, rcond=None)[0]  # minimum-norm β with Aᵀβ = C
    k_mean = K.mean(axis=0)
    x_mean = Xc.mean(axis=0)
    X_hat = x_mean + (K - k_mean) @ beta
    return Reconstruction(X_hat=X_hat, beta=beta, bandwidth=h, Y=Yc, x_mean=x_mean, k_mean=k_mean)
