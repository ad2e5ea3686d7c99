"""What a matrix handed in as dissimilarities looks like when it is something else (hints, never refusals).

- **Similarities**: a square matrix whose diagonal is not zero and either
  holds each row's largest entry (k(z, z) ≥ k(z, w), as for a score matrix)
  or bounds every entry by Cauchy–Schwarz, |k(z, w)| ≤ √(k(z, z) k(w, w))
  (as for any positive semi-definite kernel, a Gram matrix included), is far
  more likely a similarity than a dissimilarity matrix: the zero-diagonal
  refusal then says "input='similarity'" / ``--similarities``. A
  dissimilarity matrix with a stray non-zero diagonal entry satisfies neither
  (its other diagonal entries are 0 while its off-diagonal ones are not).
- **Squared distances**: distances satisfy the triangle inequality
  δ_ij ≤ δ_ik + δ_kj, and so do their square roots (√ is concave with
  √0 = 0); squared Euclidean distances violate it in every obtuse triangle
  (law of cosines), while their square roots never do. So when the entries
  violate it in a sizeable share of triangles and their square roots in far
  fewer (``looks_squared``), the matrix is probably squared: ``fit`` logs a
  WARNING with the hint. Measured on real data (``benchmarks/bench_input_hints.py``),
  distances (Euclidean, city-block, edit) give no violation, so no warning.
  Triangles are sampled (``N_TRIANGLES``, seeded): O(1) in n.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "MIN_VIOLATION_SHARE",
    "N_TRIANGLES",
    "SQRT_RATIO",
    "SquaredEvidence",
    "looks_like_similarity",
    "squared_evidence",
    "triangle_violations",
]

#: Triangles (i, j, k) sampled to count violations.
N_TRIANGLES = 50_000
#: The entries must violate the triangle inequality in at least this share of the sampled triangles ...
MIN_VIOLATION_SHARE = 0.0005
#: ... and their square roots in at most this fraction of that share.
SQRT_RATIO = 0.1
#: A violation must exceed this share of the triangle's largest side (round-off is not a violation).
_RTOL = 1e-9


def looks_like_similarity(M: np.ndarray) -> bool:
    """True for a square M (n, n) whose diagonal is not all zero and holds every row's largest entry
    or bounds every entry by Cauchy–Schwarz (|M_ij| ≤ √(M_ii M_jj), a non-negative diagonal)."""
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] < 2:
        return False
    diag = np.diagonal(M).astype(np.float64)
    if not np.any(diag != 0):
        return False
    off = np.array(M, dtype=np.float64)
    np.fill_diagonal(off, -np.inf)
    if np.all(diag >= off.max(axis=1)):
        return True
    if (diag < 0).any():
        return False
    bound = np.sqrt(np.outer(diag, diag))
    return bool(np.all(np.abs(M) <= bound * (1 + _RTOL) + _RTOL * float(diag.max())))


def triangle_violations(D: np.ndarray, n_triangles: int = N_TRIANGLES, seed: int = 0) -> float:
    """Share of sampled triangles (i, j, k distinct) with D_ij > D_ik + D_kj beyond round-off (NaN for n < 3)."""
    n = D.shape[0]
    if n < 3:
        return float("nan")
    rng = np.random.default_rng(seed)
    i, j, k = (rng.integers(0, n, size=n_triangles) for _ in range(3))
    ok = (i != j) & (j != k) & (i != k)
    i, j, k = i[ok], j[ok], k[ok]
    if i.size == 0:
        return float("nan")
    a, b, c = D[i, j], D[i, k], D[k, j]
    tol = _RTOL * np.maximum(np.maximum(a, b), c)
    return float(np.mean(a > b + c + tol))


@dataclass(frozen=True)
class SquaredEvidence:
    """Triangle-inequality violations of D and of √D; ``likely`` when D is probably squared distances."""

    share: float
    sqrt_share: float

    @property
    def likely(self) -> bool:
        return bool(self.share >= MIN_VIOLATION_SHARE and self.sqrt_share <= SQRT_RATIO * self.share)

    def message(self, name: str = "D") -> str:
        return (f"{name} looks like squared distances: {100 * self.share:.1f}% of sampled triangles violate the "
                f"triangle inequality, {100 * self.sqrt_share:.2g}% after a square root. Dissimilarities are "
                f"distances, not squared (docs/math.md §1): if {name} holds squared distances, fit on their "
                f"square roots (np.sqrt({name})); if it is meant as it is, ignore this warning")


def squared_evidence(D: np.ndarray, n_triangles: int = N_TRIANGLES, seed: int = 0) -> SquaredEvidence:
    """Violations of D (n, n) non-negative and of its square roots, on the same sampled triangles."""
    D = np.asarray(D, dtype=np.float64)
    return SquaredEvidence(share=triangle_violations(D, n_triangles, seed),
                           sqrt_share=triangle_violations(np.sqrt(D), n_triangles, seed))
