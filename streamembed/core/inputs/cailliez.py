"""Cailliez's additive constant: making non-Euclidean dissimilarities Euclidean (Ghojogh et al. 2020, §4.2 eq. 33–34).

Adding a constant c to every dissimilarity between distinct objects,
δ_ij ↦ δ_ij + c (i ≠ j), turns the double-centred kernel into

    K'(c) = K(Δ2) + 2c K(Δ) + ½ c² P,      K(M) = -½ P M P             (Ghojogh et al. 2020, eq. 33)

which is positive semidefinite for every c ≥ c*, the largest (real)
eigenvalue of the 2n × 2n matrix

    [[ 0, 2 K(Δ2) ], [ -I, -4 K(Δ) ]]                                   (Ghojogh et al. 2020, eq. 34)

(Cailliez 1983). At c = c*, K' has a zero eigenvalue besides the one of the
centring vector e: the corrected landmarks are Euclidean with no slack.
streamembed uses c = c* when it is positive beyond round-off and 0 otherwise:
Euclidean input is left as it is (a negative c* would shrink distances and
could make some negative).

Arrivals get the same constant on every dissimilarity to a landmark (an
arrival is an object distinct from each landmark), and a block's members on
their mutual ones. Cost: one dense non-symmetric eigenproblem of size 2n,
O((2n)³) at fit time (n = 1000: a few seconds), nothing per object.

Effect on monitoring (docs/math.md §4): the corrected landmark kernel is PSD, so
the landmark negative-eigenvalue share becomes 0 and every positive
eigenvalue is kept (typically n - 2 of them: the constant spreads the
landmarks over almost all n - 1 centred dimensions). c is fitted on the
landmarks only, so an arrival's corrected dissimilarities need not be
Euclidean together with them: k0 can still be negative, but far less often
(uncorrected non-Euclidean data typically has k0 < 0 for most arrivals, which
leaves the kernel-distance bound undefined). The constant also adds energy
that no landmark direction explains: roughly c²/2 of each arrival's β is a
"private" dimension, so β, the unexplained energy, k0 (≈ c²/2 and up),
Tr(k0) and the kernel-distance bound all grow with c, and ‖k0‖₂ relative to
the d-th eigengap grows. (City-block distances of 60 landmarks in R⁵, 300
arrivals: c = 8.9, k0 < 0 for 100% of arrivals before and 0% after, mean k0
46.6 against c²/2 = 39.4.) Compare drift statistics only between models
with the same correction (the refit trigger's baseline rule does this by
itself). Applied after geodesic distances (``geodesic``) this is kernel
Isomap (Choi & Choi 2004, Ghojogh et al. 2020, §4.2).
"""

from __future__ import annotations

import numpy as np

from ..fit.cmds import double_center


def cailliez_matrix(D: np.ndarray) -> np.ndarray:
    """The 2n × 2n matrix of Ghojogh et al. 2020, eq. 34 for dissimilarities D (n, n)."""
    n = D.shape[0]
    K2, _, _ = double_center(np.square(D))
    K1, _, _ = double_center(np.asarray(D, dtype=np.float64))
    M = np.zeros((2 * n, 2 * n))
    M[:n, n:] = 2.0 * K2
    M[n:, :n] = -np.eye(n)
    M[n:, n:] = -4.0 * K1
    return M


def cailliez_constant(D: np.ndarray) -> float:
    """c* of Ghojogh et al. 2020, eq. 34: the largest real eigenvalue of ``cailliez_matrix(D)`` (distance units).

    Eigenvalues whose imaginary part exceeds 1e-8 of the spectral radius are not real.
    """
    import scipy.linalg  # lazily: keeps the start-up of `embed` and `run` short

    w = scipy.linalg.eigvals(cailliez_matrix(D), check_finite=False)
    radius = float(np.abs(w).max()) if w.size else 0.0
    real = w.real[np.abs(w.imag) <= 1e-8 * max(radius, 1e-300)]
    return float(real.max()) if real.size else 0.0


#: c* below this share of the largest dissimilarity is round-off of a Euclidean input (c = 0).
ZERO_RTOL = 1e-9


def additive_constant(D: np.ndarray) -> float:
    """The constant streamembed applies: c*, or 0 when c* ≤ ``ZERO_RTOL``·max(D) (Euclidean input)."""
    c = cailliez_constant(D)
    return c if c > ZERO_RTOL * float(np.max(D, initial=0.0)) else 0.0


def add_constant(D: np.ndarray, c: float) -> np.ndarray:
    """D + c off the diagonal, for a square matrix of mutual dissimilarities."""
    out = np.asarray(D, dtype=np.float64) + c
    np.fill_diagonal(out, 0.0)
    return out
