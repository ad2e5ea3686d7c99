"""Starting points for block RR (docs/math.md §3), for stacks of equal-size blocks.

Which starts matter was measured by brute force
(``benchmarks/block_starts_study.py --problems 1000 --seed 7``: problems from
the test generator, k in 2..64, d in 1..10, in span to entirely off it):

- the first start, the members' single-object RR solutions, ended certified
  on 469 of 1000; on none of the other 531 did any start reach a
  certifiable point: a certifiable block needs no other start;
- on those 531, each structured start (projection, spectral, the two eigen
  starts) reached the best value on 94–96 % of the blocks, the first start
  on 92 %, each random one on 87 % (after the sign rule of
  ``block._run_starts``); no structured start was indispensable on its own,
  the random ones together were on 1 block; 30 brute-force random starts
  never beat the set;
- the first start, the four structured ones and two random ones all agreed
  on 399 blocks, never on a value above the best (seed 9: 435, none); the
  five without the random ones agreed on a value above the best once.
  Hence the staging in ``block``: more random starts only where these
  seven disagree.

Before the sign rule and the eigen starts, 2 in 800 such blocks ended above
30 brute-force starts. Each start is a pure function of its own block's
data (and of k, d), so a block's placement never depends on the other
blocks in a call.
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


def eigen_starts(C: np.ndarray, Beta: np.ndarray, lam: np.ndarray, base: np.ndarray | None = None) -> np.ndarray:
    """The exact minimiser for C = 0, with column signs taken from C: (s, k, d).

    With C = 0, F = ‖Y Yᵀ - G‖² + 2 tr(Λ Yᵀ Y) + const (G = β) is minimised by
    putting the i-th leading eigenvector v_i of G (eigenvalue μ_i) on the
    i-th weakest axis with length √max(μ_i - λ, 0) (von Neumann's trace
    inequality, applied to both terms). Blocks that lie mostly off the kept
    span (C small) have a local minimum for each sign pattern of the columns
    of Y; the global one has ⟨C_:j, Y_:j⟩ ≥ 0 (flipping column j changes F
    by 8 √λ_j ⟨C_:j, Y_:j⟩), which fixes the signs. With ``base`` = Ŷ and
    G = β - Ŷ Ŷᵀ (the block's residual kernel K0, docs/math.md §4) the same
    construction is added to the projection.
    """
    s, k, d = C.shape
    G = Beta if base is None else Beta - base @ base.transpose(0, 2, 1)
    mu, V = np.linalg.eigh(G)
    r = min(k, d)
    mu, V = mu[:, ::-1][:, :r], V[:, :, ::-1][:, :, :r]  # leading first
    axes = np.arange(d - 1, d - 1 - r, -1)  # weakest first
    cols = V * np.sqrt(np.maximum(mu - lam[axes], 0.0))[:, None, :]
    cols = np.where(((cols * C[:, :, axes]).sum(axis=1) < 0)[:, None, :], -cols, cols)
    Y = np.zeros((s, k, d)) if base is None else base.copy()
    Y[:, :, axes] += cols
    return Y


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
    x_i spread evenly over ±RANDOM_SCALE_OCTAVES in a scrambled order. Column
    j is multiplied by the sign of the entry of C_:j largest in magnitude, so
    that flipping an eigenvector's sign (an arbitrary convention of the
    landmark eigensolver) flips the starts with it, as it does the other
    starts and the solution.
    """
    s, k, d = C.shape
    total = first + count
    table = np.random.default_rng([RANDOM_TABLE_SEED, k, d]).standard_normal((total, k, d))[first:]
    i = np.arange(first, total)
    # golden-ratio sequence: any prefix of starts covers the scale range evenly
    x = (2.0 * ((i * 0.6180339887498949) % 1.0) - 1.0) * RANDOM_SCALE_OCTAVES
    scale = block_scale(Beta, C, lam)
    lead = np.take_along_axis(C, np.argmax(np.abs(C), axis=1)[:, None, :], axis=1)[:, 0, :]  # (s, d)
    sign = np.where(lead < 0, -1.0, 1.0)
    return table[None] * (scale[:, None, None, None] * (2.0**x)[None, :, None, None]) * sign[:, None, None, :]
