"""How negative an ordinary arrival's k0 is on non-Euclidean data: the threshold of the ``non_euclidean`` flag.

On Euclidean landmarks k0 ≥ 0 for every arrival (docs/math.md §4), so any
k0 < 0 beyond round-off says the row is not Euclidean with the landmarks.
On non-Euclidean data (edit distances, city-block) nearly every arrival has
k0 < 0, often below −β: a flag on "k0 < 0" would mark every row and say
nothing about any. The flag's threshold is therefore calibrated on the
landmarks themselves, placed as arrivals (docs/math.md §4.3): for s
landmarks (``loo_sample(n)``: every landmark up to 200, then fewer, at
least 8), refit the spectrum without landmark i — with the same floor
(``cmds.SPECTRUM_FLOOR``) the model's own k0 uses — and compute
ρ_i = −k0(l_i)/β(l_i) of l_i against the others. A row is flagged when its
−k0/β exceeds ρ* = max_i ρ_i + LOO_MARGIN·(max_i ρ_i − median_i ρ_i) (and
0) — more negative than any landmark was as an arrival, by a margin.
Landmarks and arrivals of one data set are exchangeable, so an ordinary
arrival exceeds max_i ρ_i with probability 1/(s + 1) on average; but the
false-positive rate of one fit is the tail mass above the largest of s
draws, which exceeds α with probability (1 − α)^s (α = 5 %: 8 % at s = 48,
0.6 % at s = 100): hence s = n up to 200 landmarks, and the margin, which
extrapolates the tail by three times its upper spread. Landmarks chosen by
max–min are the data's outliers, not exchangeable with arrivals (an isolated
landmark's own, positive k0 understates an interior arrival's −k0/β): the
margin is what covers that. Chosen on 96 fits of edit distances between
Python identifiers (``benchmarks/bench_flag_fpr.py``, docs/math.md §4.3):
the largest false-positive rate of a fit was 61 % with no margin, 37 % with
½, 6 % with 2, 0.6 % with 3. Euclidean landmarks (no
negative eigenvalue) get 0 without any refit. Cost: s eigendecompositions
of (n−1)² at fit time, for non-Euclidean data only (s ∝ 1/n² beyond 200
landmarks: a few seconds up to n = 1000).
"""

from __future__ import annotations

import numpy as np

from ..fit.cmds import NEGATIVE_SHARE_TOL, LandmarkSpectrum, fit_spectrum
from ..flags import FLAG_NON_EUCLIDEAN
from ..place.projection import ProjectionKernel
from ..runtime import single_blas_thread
from .leave_one_out import LeaveOneOut
from .residuals import K0_RTOL, k0_diagonal, round_off

__all__ = ["LOO_ALL_MAX", "LOO_MARGIN", "NEGATIVE_SHARE_TOL", "arrival_negative_ratio", "landmark_negative_ratio",
           "loo_ratios", "loo_sample", "non_euclidean_flags", "threshold"]

#: Up to this many landmarks, every landmark is placed as an arrival against the others (``loo_sample``).
LOO_ALL_MAX = 200
#: The threshold is the largest leave-one-out ratio plus this share of its distance to their median.
LOO_MARGIN = 3.0


def loo_sample(n: int) -> int:
    """How many landmarks to place as arrivals: all up to LOO_ALL_MAX, then ∝ 1/n² (50 at 400, 8 at 1000)."""
    return int(min(n, max(8, round(LOO_ALL_MAX * (LOO_ALL_MAX / max(n, 1)) ** 2))))


def arrival_negative_ratio(D: np.ndarray, spectrum: LandmarkSpectrum, n_components: int,
                           n_residual: int | None, solver: str,
                           whole: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """The flag's threshold ρ* on −k0/β from a leave-one-out sample of landmarks (0 for Euclidean landmarks).

    Args:
        D: (n, n) the dissimilarities the spectrum was built on (after the input pipeline).
        spectrum: the model's spectrum (its ``negative_share`` decides whether to calibrate).
        n_components, n_residual, solver: as the model was fitted, so each refit keeps eigenpairs the same way.
        whole: the kernel's every eigenpair (w (n,) descending, V (n, n)) when the fit computed them
            (``cmds.fit_spectrum_eigh``): the left-out spectra then come from it (``leave_one_out``),
            without a refit per landmark.
    """
    if spectrum.negative_share <= NEGATIVE_SHARE_TOL or D.shape[0] < 4:
        return 0.0
    return threshold(loo_ratios(D, n_components, n_residual, solver, whole))


def loo_ratios(D: np.ndarray, n_components: int, n_residual: int | None, solver: str,
               whole: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """ρ_i = −k0(l_i)/β(l_i) of ``loo_sample(n)`` landmarks, each placed against the others: (s,) (β > 0 only).

    With ``whole`` (every eigenpair of the landmarks' kernel) each left-out spectrum is a compression of it
    (``leave_one_out``, O(n²) per landmark); a landmark it cannot decide, and every landmark without
    ``whole``, is placed against a refit of the others (O(n³) each).
    """
    n = D.shape[0]
    ratios: list[float] = []
    fast = None if whole is None else LeaveOneOut(D, *whole)
    with single_blas_thread():  # s small eigendecompositions: extra BLAS threads only contend (20x under load)
        for i in np.unique(np.linspace(0, n - 1, loo_sample(n)).round().astype(np.int64)):
            got = None if fast is None else fast.ratio(int(i), n_components, n_residual)
            ratios.extend(_loo_ratio(D, int(i), n_components, n_residual, solver) if got is None else got)
    return np.asarray(ratios)


def _loo_ratio(D: np.ndarray, i: int, n_components: int, n_residual: int | None, solver: str) -> list[float]:
    """[−k0(l_i)/β(l_i)] of landmark i placed against a refit of the others ([] when β ≤ 0)."""
    n = D.shape[0]
    keep = np.delete(np.arange(n), i)
    sp = fit_spectrum(D[np.ix_(keep, keep)], n_residual, solver, np.dtype(np.float64), min(n_components, n - 2))
    r = sp.rank
    Z, _ = ProjectionKernel(sp, r, np.dtype(np.float64), n_threads=1)(np.ascontiguousarray(D[i:i + 1, keep]))
    beta = Z[:, r]
    k0 = float(k0_diagonal(beta, Z[:, :r])[0])
    return [-k0 / float(beta[0])] if beta[0] > 0 else []


def threshold(ratios: np.ndarray) -> float:
    """ρ* = max(0, max ρ + LOO_MARGIN·(max ρ − median ρ)) of the leave-one-out ratios ρ (s,)."""
    if ratios.size == 0:
        return 0.0
    top = float(ratios.max())
    return max(0.0, top + LOO_MARGIN * (top - float(np.median(ratios))))


def landmark_negative_ratio(spectrum: LandmarkSpectrum) -> float:
    """ρ_L = max over landmarks of −k0(l)/β(l), for models saved without a calibrated ``negative_ratio``.

    For landmark i, β(l_i) = B_ii and k0(l_i) = B_ii − Σ_{j≤r} λ_j U_ij² (docs/math.md §4):
    zero for Euclidean landmarks, minus the landmark's share of the negative
    eigenvalues otherwise. Objects of the same non-Euclidean kind carry as much.
    """
    sp = spectrum
    beta_l = sp.row_means - 0.5 * sp.grand_mean
    k0_l = beta_l - (np.square(sp.eigenvectors) * sp.eigenvalues).sum(axis=1)
    ok = beta_l > 0
    return float(np.max(np.maximum(-k0_l[ok] / beta_l[ok], 0.0), initial=0.0))


def non_euclidean_flags(k0: np.ndarray, beta: np.ndarray, ratio: float, dtype: np.dtype) -> np.ndarray:
    """(m,) uint32: FLAG_NON_EUCLIDEAN where k0 < −ρ·β beyond round-off (ρ: the model's threshold ``ratio``)."""
    tol = round_off(beta, k0, K0_RTOL.get(np.dtype(dtype), 1e-7))
    allowed = ratio * np.maximum(beta, 0.0)
    return np.where(k0 < -(allowed + tol), FLAG_NON_EUCLIDEAN, 0).astype(np.uint32)
