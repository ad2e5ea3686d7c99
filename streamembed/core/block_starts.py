"""Starting points for block RR (docs/math.md §3), for stacks of equal-size blocks.

Which starts matter was measured by brute force (``benchmarks/bench_block.py``
explains how; the figures are in its module docstring): from the single-object
RR solutions Newton reaches a certifiably global minimiser whenever one
exists on almost every problem; where no certificate exists the projection,
the spectral start below and a dozen seeded random configurations together
reached the best value that 30 random L-BFGS starts found on every problem
tried. Each start is a pure function of its own block's data (and of k, d),
so a block's placement never depends on the other blocks in a call.
"""

from __future__ import annotations

import numpy as np

#: Seed of the fixed table of random directions (index-free: the same for every block of a shape).
RANDOM_TABLE_SEED = 0x5EED_B10C
#: Random starts are spread over scales 2^-2 … 2^2 of the block's own size.
RANDOM_SCALE_OCTAVES = 2.0


def projection_starts(C: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Ŷ = C Λ^{-1/2}: (s, k, d) from C (s, k, d)."""
    return C / np.sqrt(lam)


def spectral_starts(C: np.ndarray, Beta: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Configurations from a joint eigendecomposition of landmarks and block.

    In the basis [U_d, e_1..e_k] the landmark-centred kernel of landmarks and
    block restricted to the kept axes is M = [[Λ, Cᵀ], [C, β]] ((d+k)×(d+k)).
    Its top-d factor Z = V_d S_d^{1/2} is what a refit with the block would
    give; Z's landmark part is rotated onto Λ^{1/2} (orthogonal Procrustes)
    and the same rotation applied to the block's part. (s, k, d).
    """
    s, k, d = C.shape
    M = np.zeros((s, d + k, d + k))
    M[:, :d, :d] = np.diag(lam)
    M[:, d:, :d] = C
    M[:, :d, d:] = C.transpose(0, 2, 1)
    M[:, d:, d:] = Beta
    w, V = np.linalg.eigh(M)
    Z = V[:, :, ::-1][:, :, :d] * np.sqrt(np.maximum(w[:, ::-1][:, :d], 0.0))[:, None, :]
    # argmin_R ‖Z_top R - Λ^{1/2}‖ over orthogonal R: R = P Qᵀ with Z_topᵀ Λ^{1/2} = P Σ Qᵀ
    P, _, Qt = np.linalg.svd(Z[:, :d, :].transpose(0, 2, 1) * np.sqrt(lam)[None, None, :])
    return Z[:, d:, :] @ (P @ Qt)


def block_scale(Beta: np.ndarray, C: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """(s,) typical coordinate size of a block: √(mean β_pp⁺ / d), at least that of Ŷ."""
    s, k, d = C.shape
    beta_pp = np.maximum(np.diagonal(Beta, axis1=1, axis2=2), 0.0).mean(axis=1)
    proj = ((C * C) / lam).reshape(s, -1).sum(axis=1) / k
    return np.sqrt(np.maximum(beta_pp, proj) / d)


def random_starts(C: np.ndarray, Beta: np.ndarray, lam: np.ndarray, first: int, count: int) -> np.ndarray:
    """Seeded random configurations ``first .. first+count-1``: (s, count, k, d).

    Start i is a fixed standard normal (k, d) matrix (one table per shape,
    seeded by RANDOM_TABLE_SEED) times the block's scale times 2^{x_i}, the
    x_i spread evenly over ±RANDOM_SCALE_OCTAVES in a scrambled order.
    """
    s, k, d = C.shape
    total = first + count
    table = np.random.default_rng([RANDOM_TABLE_SEED, k, d]).standard_normal((total, k, d))[first:]
    i = np.arange(first, total)
    # golden-ratio sequence: any prefix of starts covers the scale range evenly
    x = (2.0 * ((i * 0.6180339887498949) % 1.0) - 1.0) * RANDOM_SCALE_OCTAVES
    scale = block_scale(Beta, C, lam)
    return table[None] * (scale[:, None, None, None] * (2.0**x)[None, :, None, None])
