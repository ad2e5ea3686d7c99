"""Do input rows follow the model's landmark order? The landmark-profile share (docs/math.md §4.5).

An object z arrives as its dissimilarities a (n,) to the landmarks, column i
meaning landmark i. With x = a∘a its squared dissimilarities and x̃ = x − x̄e
their centred profile, the row's *profile share* is

    s(z) = ‖Qᵀx̃‖² / ‖x̃‖²  ∈ [0, 1],

where Q (n, q) is an orthonormal basis of span{m̃, u_1, …, u_k}: m̃ = m_Δ − g·e
the centred row means of Δ2 and u_j the leading eigenvectors of the landmark
kernel B (docs/math.md §1), k = ``PROFILE_AXES``. On Euclidean data x̃ = m̃ − 2Xz
(X the landmark configuration): a profile lies in span{m̃, U} and most of its
energy in the leading directions, for any object, novel or not. A row whose
columns belong to other landmarks (a shuffled or reversed order, another
data set's landmarks) has no relation to Q: for a uniformly random
permutation of its columns E[s] = q/(n − 1) exactly, since Qᵀe = 0
(``chance``). The landmarks' own rows give the ``reference`` level, and the
window statistic C = (mean s − chance)/(reference − chance) reads 1 for rows
like the landmarks' and 0 for rows unrelated to the landmark order. Its
cost is O(n·q) per row, on a sample of rows.

Rows are checked as given — raw dissimilarities against the raw landmark
dissimilarities, so geodesic paths and additive constants cannot hide a
mix-up — or, for a similarity model, as x_i = k(l_i, l_i) − 2k(z, l_i) (the
squared kernel distance without k(z, z), which centring removes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..fit.cmds import double_center
from ..runtime import single_blas_thread

if TYPE_CHECKING:
    from ..model import LandmarkModel

__all__ = ["ProfileCheck", "profile_check", "PROFILE_AXES", "MIN_SEPARATION"]

#: Leading eigenvectors in the basis (with m̃: q ≤ PROFILE_AXES + 1 directions).
PROFILE_AXES = 4
#: The check is made only when the landmarks' own rows stand this far above chance (in share units).
MIN_SEPARATION = 0.1


@dataclass(frozen=True)
class ProfileCheck:
    """What a model needs to score rows: the basis, the chance and reference levels, the row representation.

    Attributes:
        basis: (n, q) orthonormal, centred columns (Qᵀe = 0).
        chance: q / (n − 1), the expected share of a uniformly shuffled row.
        reference: mean share of the landmarks' own rows.
        landmark_self: (n,) k(l_i, l_i) for a similarity model (rows are x = k_self − 2k), else None.
    """

    basis: np.ndarray
    chance: float
    reference: float
    landmark_self: np.ndarray | None = None

    @property
    def n_landmarks(self) -> int:
        return int(self.basis.shape[0])

    @property
    def usable(self) -> bool:
        """The landmarks' rows stand out from chance: the check can tell a mix-up from the model's own order."""
        return (self.n_landmarks >= self.basis.shape[1] + 3
                and np.isfinite(self.reference) and self.reference - self.chance >= MIN_SEPARATION)

    def shares(self, A: np.ndarray) -> np.ndarray:
        """(m,) profile share of each row of A (m, n) [or (m, n + 1): extra columns ignored]; NaN for a flat row.

        Rows must be finite (the valid rows of a batch). float64 arithmetic;
        one BLAS thread (a narrow product, docs/performance.md).
        """
        n = self.n_landmarks
        A = np.asarray(A)[:, :n]
        if self.landmark_self is None:
            X = np.square(A, dtype=np.float64)
        else:
            X = np.multiply(A, -2.0, dtype=np.float64)
            X += self.landmark_self
        # Qᵀe = 0, so Qᵀx̃ = Qᵀx and ‖x̃‖² = Σx² − (Σx)²/n: no centred copy (in float64 the cancellation
        # matters only for rows whose entries agree to ~8 digits, which are reported as flat)
        total = X.sum(axis=1)
        squares = np.einsum("ij,ij->i", X, X)
        spread = squares - total * total / n
        with single_blas_thread():
            C = X @ self.basis
        inside = np.einsum("ij,ij->i", C, C)
        out = np.full(X.shape[0], np.nan)
        ok = spread > 1e-12 * squares
        out[ok] = np.minimum(inside[ok] / spread[ok], 1.0)
        return out

    def consistency(self, mean_share: float) -> float:
        """C = (mean share − chance) / (reference − chance): 1 like the landmarks' rows, 0 like shuffled rows."""
        return float((mean_share - self.chance) / (self.reference - self.chance))


def profile_check(model: LandmarkModel) -> ProfileCheck | None:
    """The model's :class:`ProfileCheck` (computed once per model), or None where rows cannot be checked.

    None for a similarity model whose kernel distances are transformed
    further (geodesics, an additive constant): its stored spectrum is not
    that of the rows' representation.
    """
    return model.cached("profile_check", lambda: _build(model))


def _build(model: LandmarkModel) -> ProfileCheck | None:
    sp = model.spectrum
    pipe = model.pipeline
    if model.dissimilarities is not None:
        D = np.asarray(model.dissimilarities, dtype=np.float64)
        if pipe.identity:
            m_tilde, U = sp.row_means - sp.grand_mean, sp.eigenvectors[:, :PROFILE_AXES]
        else:  # the spectrum is of transformed dissimilarities: take the raw landmarks' own
            m_tilde, U = _raw_basis(D, PROFILE_AXES)
        landmark_rows = D
        self_sim = None
    elif pipe.similarity is not None and pipe.geodesic is None and (pipe.constant is None
                                                                      or pipe.constant.constant <= 0):
        m_tilde, U = sp.row_means - sp.grand_mean, sp.eigenvectors[:, :PROFILE_AXES]
        B = (sp.eigenvectors * sp.eigenvalues) @ sp.eigenvectors.T  # the kernel's positive part
        landmark_rows = np.diag(B)[None, :] - 2.0 * B  # row j: centred, it is landmark j's profile
        self_sim = np.asarray(pipe.similarity.landmark_self, dtype=np.float64)
    else:
        return None
    basis = _orthonormal(np.column_stack([m_tilde, U]))
    n, q = basis.shape
    check = ProfileCheck(basis=basis, chance=q / max(n - 1, 1), reference=float("nan"))
    ref = check.shares(landmark_rows) if self_sim is None else _shares_of_profiles(basis, landmark_rows)
    return ProfileCheck(basis=basis, chance=check.chance, reference=float(np.nanmean(ref)), landmark_self=self_sim)


def _shares_of_profiles(basis: np.ndarray, X: np.ndarray) -> np.ndarray:
    Xc = X - X.mean(axis=1, keepdims=True)
    spread = np.einsum("ij,ij->i", Xc, Xc)
    C = Xc @ basis
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(spread > 0, np.einsum("ij,ij->i", C, C) / spread, np.nan)


def _raw_basis(D: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(m̃ (n,), the top-k eigenvectors (n, k) of B = −½PΔ2P) of raw landmark dissimilarities D."""
    B, row_means, grand = double_center(D * D)
    n = B.shape[0]
    k = min(k, n - 1)
    import scipy.linalg  # lazily: only transformed dissimilarities need it (0.1-0.3 s of `embed`'s start-up)

    w, V = scipy.linalg.eigh(B, subset_by_index=[n - k, n - 1])
    V = V[:, ::-1][:, w[::-1] > 0]
    return row_means - grand, V


def _orthonormal(M: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the column span of M (n, c) (left singular vectors of its unit columns).

    Columns of (numerically) zero norm, e.g. m̃ of landmarks that are all
    alike, and directions the others already span are dropped; the basis
    stays inside the span, so centred columns give a centred basis.
    """
    norms = np.linalg.norm(M, axis=0)
    M = M[:, norms > 1e-10 * max(float(norms.max(initial=0.0)), 1e-300)]
    if M.shape[1] == 0:
        return np.zeros((M.shape[0], 0))
    U, S, _ = np.linalg.svd(M / np.linalg.norm(M, axis=0), full_matrices=False)
    return np.ascontiguousarray(U[:, 1e-8 * S[0] < S])
