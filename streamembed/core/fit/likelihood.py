"""Held-out likelihood of a d-dimensional map: probabilistic PCA in the landmark kernel's space (docs/math.md §4.7).

``LandmarkMDS.score`` needs a number that a larger d does not improve for
free, so that ``GridSearchCV`` over ``n_components`` picks a d where the
map's axes stop carrying more than noise. The share of energy explained
(1 − Σ unexplained / Σ β) cannot: it rises with every axis. This module
scores held-out objects by their log-likelihood under probabilistic PCA
(Tipping & Bishop 1999) fitted to the landmarks, the criterion
scikit-learn's ``PCA.score`` uses, here in the feature space of the
landmark kernel:

    s_j = λ_j / (n − 1)        (j ≤ r: the landmark covariance's eigenvalues, λ_j the kernel's)
    σ²  = Σ_{d<j≤r} s_j / (r − d)                      (the noise: mean discarded eigenvalue)
    ℓ(z) = −½ [ r log 2π + Σ_{j≤d} log s_j + (r − d) log σ²
                + Σ_{j≤d} ŷ_j² / s_j + (β − ‖ŷ‖²) / σ² ]                              (4.7)

with r the number of positive eigenvalues kept (the ambient dimension),
ŷ the object's projection (d,) and β − ‖ŷ‖² its unexplained energy
(docs/math.md §4.1). For Euclidean distances between feature vectors of
full rank r = p < n this is ``PCA(d).score`` of those vectors, the same
number (a test checks it). A kept axis costs
log s_j and saves its share of the noise term, so ℓ peaks where the
discarded eigenvalues stop separating from the noise level. Negative
unexplained energy (non-Euclidean rows) counts as 0; σ² is floored at
``SIGMA2_FLOOR`` of s_1 so that d = r stays finite.

Units: ℓ in nats per object; it depends on the distance unit through a
constant that is the same for every d.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SIGMA2_FLOOR", "ppca_loglik"]

#: σ² is at least this share of the largest covariance eigenvalue (d = r leaves no discarded eigenvalue).
SIGMA2_FLOOR = 1e-12


def ppca_loglik(y: np.ndarray, unexplained: np.ndarray, eigenvalues: np.ndarray, n_landmarks: int) -> np.ndarray:
    """(m,) log-likelihood (4.7) of m objects under the d-axis probabilistic PCA of the landmarks.

    Args:
        y: (m, d) projections in the model's own frame (distance units).
        unexplained: (m,) β − ‖ŷ‖² (squared distance units).
        eigenvalues: (r,) every positive landmark-kernel eigenvalue kept, decreasing (r ≥ d).
        n_landmarks: n.
    """
    y = np.asarray(y, dtype=np.float64)
    d = y.shape[1]
    lam = np.asarray(eigenvalues, dtype=np.float64)
    r = int(lam.size)
    s = lam / float(max(n_landmarks - 1, 1))  # scikit-learn's unbiased explained_variance_
    sigma2 = float(s[d:].mean()) if r > d else 0.0
    sigma2 = max(sigma2, SIGMA2_FLOOR * float(s[0]))
    e = np.maximum(np.asarray(unexplained, dtype=np.float64), 0.0)
    quad = np.square(y) @ (1.0 / s[:d]) + e / sigma2
    logdet = float(np.log(s[:d]).sum()) + (r - d) * np.log(sigma2)
    return -0.5 * (r * np.log(2.0 * np.pi) + logdet + quad)
