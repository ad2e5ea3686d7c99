"""How much a placement moves when the landmark set changes: the spread over landmark-subset maps (docs/math.md §9.3).

At fit time, B maps are fitted on random subsets of the landmarks (each
leaves out a share ``LEAVE_OUT`` of them), and each is aligned to the main
map by Procrustes on the landmarks it keeps (docs/math.md §5). Projection
onto a map is affine in the squared dissimilarities a2 of an object: with
U_b, Λ_b the subset's kept eigenpairs (U_b ⊥ 1, so the centring by the row's
own mean drops out) and m_b its landmarks' row means,

    ŷ_b(a2) = −½ (a2_S − m_b)ᵀ U_b Λ_b^{-1/2} R_b + s_b,

so the deviations ŷ_b − ŷ of all B aligned placements from the main one are
one affine map a2 ↦ a2 G + h with G (n, B·d), h (B·d,), stored with the model.
The spread is the root-mean-square deviation √(1/B Σ_b ‖ŷ_b − ŷ‖²), in map
units. On the hot path it costs one (m, n)·(n, B·d) product. G's columns sum
to zero (each map's eigenvectors are orthogonal to the ones vector), so the
row's mean squared dissimilarity is subtracted first: smaller numbers, the
same result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fit.cmds import double_center, partial_eigh
from ..runtime import single_blas_thread
from ..refit.procrustes import orthogonal_procrustes_align

__all__ = ["N_MAPS", "LEAVE_OUT", "SensitivityMaps", "sensitivity_maps"]

#: Landmark-subset maps fitted per model (each costs d columns of the radius's product on the hot path).
N_MAPS = 4
#: Share of the landmarks each subset map leaves out (half-samples spread more, and ranked errors better
#: than leaving out a fifth on the real data sets of ``benchmarks/radius_calibration.py``).
LEAVE_OUT = 0.5


@dataclass(frozen=True)
class SensitivityMaps:
    """The deviations of the B aligned subset placements from the main one, as an affine map of a2.

    Attributes:
        weights: (n, B·d) G, per unit of squared dissimilarity (map units per squared distance unit).
        offsets: (B·d,) h, in map units.
        n_components: d.
    """

    weights: np.ndarray
    offsets: np.ndarray
    n_components: int

    @property
    def n_maps(self) -> int:
        return int(self.offsets.shape[0]) // int(self.n_components)

    def spread(self, A: np.ndarray) -> np.ndarray:
        """√(mean_b ‖ŷ_b − ŷ‖²) per object, (m,) float64 in map units, from core dissimilarities A (m, n)."""
        a2 = np.square(A, dtype=np.float64) if A.dtype != np.float32 else np.square(A)
        a2 -= a2.mean(axis=1, keepdims=True)
        W = self.weights if a2.dtype == self.weights.dtype else self.weights.astype(a2.dtype)
        dev = a2 @ W
        dev += self.offsets.astype(dev.dtype, copy=False)
        return np.sqrt(np.einsum("ij,ij->i", dev, dev, dtype=np.float64) / self.n_maps)


def _top_pairs(D: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(λ (d,), U (k, d), row means (k,)) of the classical MDS of dissimilarities D (k, k), top d."""
    B, row_means, _ = double_center(np.square(D), overwrite=True)
    if D.shape[0] <= 600:
        w, V = np.linalg.eigh(B)
        w, V = w[::-1][:d], V[:, ::-1][:, :d]
    else:
        with single_blas_thread():
            w, V = partial_eigh(B, d, d)
    return w, V, row_means


def sensitivity_maps(D: np.ndarray, eigenvectors: np.ndarray, eigenvalues: np.ndarray, row_means: np.ndarray, *,
                     n_maps: int = N_MAPS, leave_out: float = LEAVE_OUT, seed: int = 0) -> SensitivityMaps | None:
    """The subset maps of landmarks with core dissimilarities D (n, n) and main map U_d (n, d), Λ_d (d,).

    ``row_means`` (n,): the main map's m_Δ. Subsets whose map has fewer than d positive eigenvalues are
    skipped; None when no subset map can be fitted (fewer than d + 2 landmarks kept).
    """
    n, d = eigenvectors.shape
    keep = n - max(1, int(round(leave_out * n)))
    if keep < d + 2:
        return None
    main_w = -0.5 * eigenvectors / np.sqrt(eigenvalues)
    main_c = -(row_means @ main_w)
    X = eigenvectors * np.sqrt(eigenvalues)
    rng = np.random.default_rng(seed)
    G, h = [], []
    for _ in range(int(n_maps)):
        S = np.sort(rng.choice(n, keep, replace=False))
        lam, U, m = _top_pairs(D[np.ix_(S, S)], d)
        if lam.shape[0] < d or not (lam > 1e-12 * max(float(lam[0]), 1e-300)).all():
            continue
        w_b = -0.5 * U / np.sqrt(lam)
        fit = orthogonal_procrustes_align(U * np.sqrt(lam), X[S])
        W_b = np.zeros((n, d))
        W_b[S] = w_b @ fit.R
        G.append(W_b - main_w)
        h.append(-(m @ w_b) @ fit.R + fit.shift - main_c)
    if not G:
        return None
    return SensitivityMaps(weights=np.ascontiguousarray(np.hstack(G)), offsets=np.concatenate(h), n_components=d)
