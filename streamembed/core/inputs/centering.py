"""Centring new objects against the landmarks (docs/math.md §2).

Centring always uses the landmarks only (Gower's τ_w with weight on the
landmarks), so arriving objects never move the centre. These are the
reference forms used for blocks and residuals; the projection hot path folds
the same algebra into one matrix product (``projection.ProjectionKernel``).
"""

from __future__ import annotations

import numpy as np


def center_cross(A2: np.ndarray, row_means: np.ndarray, grand_mean: float) -> tuple[np.ndarray, np.ndarray]:
    """Centred cross-similarities of m objects.

    Args:
        A2: (m, n) squared dissimilarities to the landmarks.
        row_means: (n,) landmark row means m_Δ of Δ2.
        grand_mean: g = mean(Δ2).

    Returns:
        B: (m, n) with B_pi = -1/2 (a2_pi - ā_p - m_Δ,i + g).
        beta: (m,) centred self-similarities β_p = ā_p - g/2.
    """
    abar = A2.mean(axis=1)
    B = A2 - abar[:, None]
    B -= row_means[None, :]
    B += grand_mean
    B *= -0.5
    return B, abar - 0.5 * grand_mean


def center_block(
    A2: np.ndarray, C2: np.ndarray, row_means: np.ndarray, grand_mean: float
) -> tuple[np.ndarray, np.ndarray]:
    """Centred cross- and mutual similarities of a block of k objects.

    Args:
        A2: (k, n) squared dissimilarities to the landmarks.
        C2: (k, k) squared mutual dissimilarities α2.

    Returns:
        B: (k, n) centred cross-similarities (as in :func:`center_cross`).
        Beta: (k, k) with β_pq = -1/2 (α2_pq - ā_p - ā_q + g); its diagonal is
        the single-object β.
    """
    B, _ = center_cross(A2, row_means, grand_mean)
    abar = A2.mean(axis=1)
    Beta = C2 - abar[:, None]
    Beta -= abar[None, :]
    Beta += grand_mean
    Beta *= -0.5
    return B, Beta
