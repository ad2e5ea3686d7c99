"""Levenshtein distances between many strings, vectorised over pairs with numpy.

The dynamic programme D[i, j] = min(D[i-1, j] + 1, D[i, j-1] + 1,
D[i-1, j-1] + [a_i ≠ b_j]) is run one row i at a time for a whole chunk of
pairs at once. The only sequential dependency inside a row, the insertion term
D[i, j-1] + 1, is a running minimum:

    D[i, j] = min_{l ≤ j} (u[l] + j - l) = j + cummin_l (u[l] - l),

with u the row before insertions, so each row is a few array operations on a
(pairs, L+1) block (``np.minimum.accumulate``). Strings are padded to a common
length; padding never influences D[|a|, |b|] because that entry depends only
on the first |a| and |b| characters, and it is read off at row |a|.

Cost: O(P · L²) element operations for P pairs of length ≤ L, in chunks of
``chunk`` pairs (memory O(chunk · L)). Fine for a few hundred strings of
length ≤ 100 (an evaluation dataset), not for bulk work.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["encode_strings", "levenshtein_pairs", "levenshtein_matrix", "normalized_levenshtein_matrix"]


def encode_strings(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Code points of the strings padded with -1: (codes (s, L) int32, lengths (s,) int64)."""
    lengths = np.array([len(s) for s in strings], dtype=np.int64)
    L = int(lengths.max()) if len(strings) else 0
    codes = np.full((len(strings), max(L, 1)), -1, dtype=np.int32)
    for i, s in enumerate(strings):
        if s:
            codes[i, : len(s)] = np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32).astype(np.int32)
    return codes, lengths


def levenshtein_pairs(
    codes_a: np.ndarray, len_a: np.ndarray, codes_b: np.ndarray, len_b: np.ndarray, chunk: int = 4096
) -> np.ndarray:
    """Edit distances of P aligned pairs: codes_a (P, La), len_a (P,), codes_b (P, Lb), len_b (P,) -> (P,) int64."""
    P = codes_a.shape[0]
    out = np.empty(P, dtype=np.int64)
    Lb = codes_b.shape[1]
    j = np.arange(Lb + 1, dtype=np.int32)
    for start in range(0, P, chunk):
        sl = slice(start, min(start + chunk, P))
        a, b, la, lb = codes_a[sl], codes_b[sl], len_a[sl], len_b[sl]
        p = a.shape[0]
        rows = np.arange(p)
        prev = np.broadcast_to(j, (p, Lb + 1)).copy()  # D[0, j] = j
        res = np.where(la == 0, lb, 0)
        u = np.empty_like(prev)
        for i in range(1, int(la.max(initial=0)) + 1):
            mismatch = (b != a[:, i - 1 : i]).astype(np.int32)  # (p, Lb)
            u[:, 0] = i
            np.minimum(prev[:, 1:] + 1, prev[:, :-1] + mismatch, out=u[:, 1:])
            u -= j
            np.minimum.accumulate(u, axis=1, out=u)
            u += j
            prev, u = u, prev
            done = la == i
            if done.any():
                res[done] = prev[rows[done], lb[done]]
        out[sl] = res
    return out


def levenshtein_matrix(strings: Sequence[str], chunk: int = 4096) -> np.ndarray:
    """(s, s) symmetric matrix of edit distances (float64, zero diagonal)."""
    codes, lengths = encode_strings(strings)
    s = len(strings)
    iu, ju = np.triu_indices(s, 1)
    # Put the shorter string in the row loop: fewer sequential rows.
    swap = lengths[iu] > lengths[ju]
    first = np.where(swap, ju, iu)
    second = np.where(swap, iu, ju)
    order = np.argsort(lengths[first], kind="stable")  # similar row counts share a chunk
    first, second = first[order], second[order]
    d = levenshtein_pairs(codes[first], lengths[first], codes[second], lengths[second], chunk)
    D = np.zeros((s, s), dtype=np.float64)
    D[first, second] = d
    D[second, first] = d
    return D


def normalized_levenshtein_matrix(strings: Sequence[str], chunk: int = 4096) -> np.ndarray:
    """Edit distance divided by the longer string's length: (s, s) in [0, 1] (0 for two empty strings).

    Not Euclidean (and not always a metric): a realistic non-Euclidean input.
    """
    D = levenshtein_matrix(strings, chunk)
    lengths = np.array([len(s) for s in strings], dtype=np.float64)
    denom = np.maximum(lengths[:, None], lengths[None, :])
    return np.divide(D, denom, out=np.zeros_like(D), where=denom > 0)
