"""How negative an ordinary arrival's k0 is on non-Euclidean data: the threshold of the ``non_euclidean`` flag.

On Euclidean landmarks k0 ≥ 0 for every arrival (docs/math.md §4), so any
k0 < 0 beyond round-off says the row is not Euclidean with the landmarks.
On non-Euclidean data (edit distances, city-block) nearly every arrival has
k0 < 0, often below −β: a flag on "k0 < 0" would mark every row and say
nothing about any. The flag's threshold is therefore calibrated on the
landmarks themselves, placed as arrivals: for an evenly spaced sample of
s landmarks (``loo_sample(n)``: 48 up to 400 landmarks, fewer above, at
least 8), refit the spectrum without landmark i and compute
ρ_i = −k0(l_i)/β(l_i) of l_i against the others. A row is flagged when its
−k0/β exceeds max_i ρ_i — more negative than any landmark was as an
arrival. Landmarks and arrivals of one data set are exchangeable, so an
ordinary arrival is flagged with probability about 1/(s + 1) (2% at s = 48).
Euclidean landmarks (no negative eigenvalue) get 0 without any refit.
Cost: s eigendecompositions at fit time, for non-Euclidean data only (s
shrinks with n so that it stays a few seconds at n = 1000).
"""

from __future__ import annotations

import numpy as np

from .cmds import LandmarkSpectrum, fit_spectrum
from .projection import ProjectionKernel

__all__ = ["LOO_SAMPLE", "NEGATIVE_SHARE_TOL", "arrival_negative_ratio", "loo_sample"]

#: Landmarks placed as arrivals against the others (up to 400 landmarks; see ``loo_sample``).
LOO_SAMPLE = 48
#: Below this share of negative eigen-energy the landmarks count as Euclidean (round-off).
NEGATIVE_SHARE_TOL = 1e-9


def loo_sample(n: int) -> int:
    """How many landmarks to place as arrivals: LOO_SAMPLE up to 400 landmarks, then ∝ 1/n² (≥ 8)."""
    return int(min(n, max(8, min(LOO_SAMPLE, round(LOO_SAMPLE * (400 / max(n, 1)) ** 2)))))


def arrival_negative_ratio(D: np.ndarray, spectrum: LandmarkSpectrum, n_components: int,
                           n_residual: int | None, solver: str) -> float:
    """max_i −k0(l_i)/β(l_i) over a leave-one-out sample of landmarks (0 for Euclidean landmarks).

    Args:
        D: (n, n) the dissimilarities the spectrum was built on (after the input pipeline).
        spectrum: the model's spectrum (its ``negative_share`` decides whether to calibrate).
        n_components, n_residual, solver: as the model was fitted, so each refit keeps as many eigenpairs.
    """
    n = D.shape[0]
    if spectrum.negative_share <= NEGATIVE_SHARE_TOL or n < 4:
        return 0.0
    worst = 0.0
    for i in np.unique(np.linspace(0, n - 1, loo_sample(n)).round().astype(np.int64)):
        keep = np.delete(np.arange(n), i)
        sp = fit_spectrum(D[np.ix_(keep, keep)], n_residual, solver, np.dtype(np.float64),
                          min(n_components, n - 2))
        r = sp.rank
        Z, _ = ProjectionKernel(sp, r, np.dtype(np.float64), n_threads=1)(np.ascontiguousarray(D[i:i + 1, keep]))
        beta = float(Z[0, r])
        k0 = beta - float(np.square(Z[0, :r]).sum())
        if beta > 0:
            worst = max(worst, -k0 / beta)
    return worst
