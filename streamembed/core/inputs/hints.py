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
  (law of cosines), while their square roots never do. But so does a
  dissimilarity that is not a metric at all, such as dynamic time warping
  between series (a middle series can match both ends cheaply): on real EEG
  windows DTW violates it in 0.2 % of triangles and its square roots in none,
  exactly like a squared metric. What only squared *Euclidean* distances have
  is that their square roots are Euclidean distances: the double-centred
  matrix −½ J D J (the kernel of √D, docs/math.md §1) is positive
  semi-definite, while DTW's has negative eigenvalues (5 % of the spectrum's
  mass there). So D counts as squared (``SquaredEvidence.likely``: ``fit``
  logs a WARNING) only when it violates the triangle inequality in a
  sizeable share of triangles, its square roots in far fewer, **and** that
  kernel of a sample of ``N_SPECTRUM`` objects is PSD to round-off. The price:
  a squared non-Euclidean metric (squared city-block or edit distances) is
  not told apart from a non-metric dissimilarity by D alone and is not
  flagged. Measured on real data (``benchmarks/bench_input_hints.py``):
  distances (Euclidean, city-block, edit) and DTW give no warning, squared
  Euclidean distances always do. Triangles are sampled (``N_TRIANGLES``,
  seeded): O(1) in n; the spectrum is of at most ``N_SPECTRUM`` objects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "MIN_VIOLATION_SHARE",
    "N_SPECTRUM",
    "N_TRIANGLES",
    "PSD_TOLERANCE",
    "SQRT_RATIO",
    "SquaredEvidence",
    "looks_like_similarity",
    "squared_evidence",
    "triangle_violations",
    "sqrt_negative_share",
]

#: Triangles (i, j, k) sampled to count violations.
N_TRIANGLES = 50_000
#: The entries must violate the triangle inequality in at least this share of the sampled triangles ...
MIN_VIOLATION_SHARE = 0.0005
#: ... and their square roots in at most this fraction of that share.
SQRT_RATIO = 0.1
#: A violation must exceed this share of the triangle's largest side (round-off is not a violation).
_RTOL = 1e-9
#: Objects (evenly spaced) whose double-centred D is checked for being positive semi-definite.
N_SPECTRUM = 300
#: ... to this share of the spectrum's absolute mass in negative eigenvalues (round-off of float32 squares).
PSD_TOLERANCE = 1e-6


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


def sqrt_negative_share(D: np.ndarray, n: int = N_SPECTRUM) -> float:
    """Share of the absolute eigenvalue mass of −½ J D J (the kernel of √D) that is negative, on ``n`` evenly spaced
    objects: 0 (to round-off) when √D are Euclidean distances, i.e. D squared Euclidean distances."""
    m = D.shape[0]
    idx = np.unique(np.linspace(0, m - 1, min(n, m)).round().astype(int))
    S = np.asarray(D[np.ix_(idx, idx)], dtype=np.float64)
    S = (S + S.T) / 2
    K = -0.5 * (S - S.mean(axis=0) - S.mean(axis=1)[:, None] + S.mean())
    w = np.linalg.eigvalsh(K)
    total = float(np.abs(w).sum())
    return float(-w[w < 0].sum() / total) if total > 0 else 0.0


@dataclass(frozen=True)
class SquaredEvidence:
    """Triangle-inequality violations of D and of √D, and how far √D is from Euclidean; ``likely`` when D is
    probably squared Euclidean distances (see the module doc)."""

    share: float
    sqrt_share: float
    sqrt_negative: float = 0.0

    @property
    def likely(self) -> bool:
        return bool(self.share >= MIN_VIOLATION_SHARE and self.sqrt_share <= SQRT_RATIO * self.share
                    and self.sqrt_negative <= PSD_TOLERANCE)

    def message(self, name: str = "D") -> str:
        return (f"{name} looks like squared distances: {100 * self.share:.1f}% of sampled triangles violate the "
                f"triangle inequality, {100 * self.sqrt_share:.2g}% after a square root, and the square roots are "
                f"Euclidean distances (their kernel has no negative eigenvalue). Dissimilarities are distances, "
                f"not squared (docs/math.md §1): if {name} holds squared distances, fit on their square roots "
                f"(np.sqrt({name})); if it is meant as it is, ignore this warning")


def squared_evidence(D: np.ndarray, n_triangles: int = N_TRIANGLES, seed: int = 0) -> SquaredEvidence:
    """Violations of D (n, n) non-negative and of its square roots, on the same sampled triangles, and the negative
    share of √D's kernel (computed only when the triangles point to a square)."""
    D = np.asarray(D, dtype=np.float64)
    share = triangle_violations(D, n_triangles, seed)
    sqrt_share = triangle_violations(np.sqrt(D), n_triangles, seed)
    pointed = share >= MIN_VIOLATION_SHARE and sqrt_share <= SQRT_RATIO * share
    return SquaredEvidence(share=share, sqrt_share=sqrt_share, sqrt_negative=sqrt_negative_share(D) if pointed else 1.0)
