"""Choosing landmarks (docs/math.md §5, §7).

Four strategies, each returning candidate indices:

* ``maxmin_select``: max–min (farthest-point) selection, spreads landmarks
  over the data and keeps its extremes in view;
* ``random_select``: uniform sampling, landmarks distributed like the data;
* ``kmeanspp_select``: k-means++ seeding on dissimilarities (Arthur and
  Vassilvitskii 2007): each pick drawn with probability proportional to its
  squared dissimilarity to the nearest pick so far, between the two above;
* ``residual_pivoted_select``: for a refit, keep the old landmarks and add
  objects the current map does not explain, drawn by randomly pivoted
  Cholesky on the map's residual kernel (Chen, Epperly, Tropp, Webber 2022/
  2024), thinning the most crowded old landmarks to make room.

Selection loops run once per chosen landmark over whole candidate arrays;
they are refit-time work, not per-object streaming work.
"""

from __future__ import annotations

import numpy as np
import scipy.spatial.distance

from .errors import InputError

__all__ = ["SELECTIONS", "maxmin_select", "random_select", "kmeanspp_select", "residual_pivoted_select",
           "thin_crowded"]

#: Names accepted by ``core.refit.refit(selection=...)`` (config ``refit.selection``).
SELECTIONS = ("residual", "maxmin", "random", "kmeans++")


def _check_count(n_select: int, N: int) -> None:
    if not 1 <= n_select <= N:
        raise InputError(f"n_select must be between 1 and {N}, got {n_select}")


def maxmin_select(
    n_select: int,
    D: np.ndarray | None = None,
    X: np.ndarray | None = None,
    metric: str = "euclidean",
    first: int = 0,
    required: np.ndarray | None = None,
) -> np.ndarray:
    """Indices of ``n_select`` objects chosen by max–min selection.

    Each new pick is the object farthest from all picks so far, which spreads
    landmarks over the data and keeps outliers of the current stream in view.
    Give either a full dissimilarity matrix D (N, N) or features X (N, p) with
    a scipy metric (distances are then computed one row at a time, O(N·p) memory).

    Args:
        n_select: how many to choose (≤ N).
        first: the first pick when ``required`` is empty.
        required: indices that must be kept (e.g. old landmarks); picked first.
    """
    if (D is None) == (X is None):
        raise InputError("maxmin_select needs exactly one of D or X")
    N = D.shape[0] if D is not None else X.shape[0]
    _check_count(n_select, N)

    def row(i: int) -> np.ndarray:
        if D is not None:
            return np.asarray(D[i], dtype=np.float64)
        return scipy.spatial.distance.cdist(X[i : i + 1], X, metric=metric)[0]

    picks = [int(i) for i in (required if required is not None else [])][:n_select]
    if not picks:
        picks = [int(first)]
    mind = np.full(N, np.inf)
    for i in picks:
        mind = np.minimum(mind, row(i))
    mind[picks] = -1.0
    while len(picks) < n_select:
        i = int(np.argmax(mind))
        picks.append(i)
        mind = np.minimum(mind, row(i))
        mind[i] = -1.0
    return np.asarray(picks, dtype=np.int64)


def random_select(n_select: int, N: int, rng: np.random.Generator) -> np.ndarray:
    """``n_select`` of N indices uniformly without replacement (sorted)."""
    _check_count(n_select, N)
    return np.sort(rng.choice(N, size=n_select, replace=False)).astype(np.int64)


def kmeanspp_select(n_select: int, D: np.ndarray, rng: np.random.Generator, first: int | None = None) -> np.ndarray:
    """k-means++ seeding on a dissimilarity matrix D (N, N): picks in order of choice.

    The first pick is ``first`` (default: uniform); each next one is drawn with
    probability ∝ min_{picks} δ²(i, pick). Falls back to uniform among the
    unpicked when every remaining δ is 0 (duplicates).
    """
    N = D.shape[0]
    _check_count(n_select, N)
    picks = [int(rng.integers(N)) if first is None else int(first)]
    d2 = np.square(np.asarray(D[picks[0]], dtype=np.float64))
    d2[picks[0]] = 0.0
    taken = np.zeros(N, dtype=bool)
    taken[picks[0]] = True
    while len(picks) < n_select:
        w = np.where(taken, 0.0, np.maximum(d2, 0.0))
        total = w.sum()
        i = int(rng.choice(N, p=w / total)) if total > 0 else int(rng.choice(np.flatnonzero(~taken)))
        picks.append(i)
        taken[i] = True
        d2 = np.minimum(d2, np.square(np.asarray(D[i], dtype=np.float64)))
    return np.asarray(picks, dtype=np.int64)


def thin_crowded(D: np.ndarray, keep: np.ndarray, removable: np.ndarray, n_remove: int) -> np.ndarray:
    """Remove ``n_remove`` of ``removable`` from the set ``keep``, most crowded first.

    Repeatedly drops the removable member whose nearest other member is
    closest (reverse max–min: the landmark the map misses least), updating
    nearest-neighbour distances only for members that lost their neighbour.

    Args:
        D: (N, N) dissimilarities.
        keep: (s,) indices of the current set.
        removable: boolean mask (s,) of members that may be dropped.
        n_remove: how many to drop (≤ removable.sum()).
    Returns:
        The remaining indices, in their original order.
    """
    keep = np.asarray(keep, dtype=np.int64)
    alive = np.ones(keep.size, dtype=bool)
    can = np.asarray(removable, dtype=bool).copy()
    if n_remove > int(can.sum()):
        raise InputError(f"cannot remove {n_remove} of {int(can.sum())} removable landmarks")
    sub = np.asarray(D, dtype=np.float64)[np.ix_(keep, keep)].copy()
    np.fill_diagonal(sub, np.inf)
    nn = sub.argmin(axis=1)
    nnd = sub[np.arange(keep.size), nn]
    for _ in range(int(n_remove)):
        score = np.where(alive & can, nnd, np.inf)
        j = int(np.argmin(score))
        alive[j] = False
        sub[:, j] = np.inf
        stale = np.flatnonzero(alive & (nn == j))
        if stale.size:
            nn[stale] = sub[stale].argmin(axis=1)
            nnd[stale] = sub[stale, nn[stale]]
    return keep[alive]


def residual_pivoted_select(
    n_select: int,
    R: np.ndarray,
    D: np.ndarray,
    n_old: int,
    rng: np.random.Generator,
    *,
    beta: np.ndarray | None = None,
    greedy: bool = False,
    max_new: int | None = None,
    tolerance: float = 1.25,
) -> tuple[np.ndarray, dict]:
    """Keep the old landmarks, add what the map does not explain (randomly pivoted Cholesky).

    Candidates 0..n_old-1 are the old landmarks, the others the reservoir.
    ``R`` is the residual kernel of the current d-dimensional map over the
    candidates, R = K − Ŷ_d Ŷ_dᵀ (docs/math.md §7): its diagonal is each
    candidate's unexplained energy u = β − ‖ŷ‖².

    1. Budget: the reservoir's excess unexplained energy, mean(u) − tolerance ×
       the old landmarks' own mean u, as a share of its mean energy β, times
       ``n_select`` (at most ``max_new``, default half of it): a stream the map
       explains as well as its landmarks gets no new landmark; one whose
       energy is half off the map gets about half of the landmarks.
    2. Span: new landmarks are drawn from the reservoir with probability ∝
       the current diagonal of R (``greedy``: its largest), and after each pick
       R is updated by the pivot's Cholesky column (RPCholesky: Chen, Epperly,
       Tropp, Webber), so each pick goes to what the earlier ones leave
       unexplained, until the reservoir is explained as well as the landmarks.
    3. Weight: if budget is left, the rest is drawn ∝ the original u without
       replacement, so the new region gets landmarks in proportion to its
       energy (a d-dimensional map follows the landmarks' second moments).
    4. The most crowded old landmarks make room (``thin_crowded``); the others
       stay, so the refit's Procrustes alignment rests on many shared landmarks.

    Args:
        n_select: landmarks of the new set.
        R: (N, N) residual kernel (squared-distance units); negative diagonal
            entries (non-Euclidean input) count as 0.
        D: (N, N) dissimilarities (for thinning and growth).
        n_old: old landmarks among the candidates (the first rows).
        rng: randomness of the pivots (unused when ``greedy``).
        beta: (N,) the candidates' energy β = K(z, z) (default: the budget is
            relative to the diagonal of R plus the landmarks' mean, a rougher share).
    Returns:
        (sorted indices (n_select,), details: {"new": picks, "dropped_old": count,
        "budget", "residual_before", "residual_after": reservoir mean residuals,
        "landmark_residual"}).
    """
    R = np.asarray(R, dtype=np.float64)
    N = R.shape[0]
    _check_count(n_select, N)
    if R.shape != (N, N) or D.shape != (N, N) or not 0 <= n_old <= N:
        raise InputError(f"residual_pivoted_select needs R and D of shape (N, N) and 0 ≤ n_old ≤ N, got "
                         f"{R.shape}, {D.shape}, n_old={n_old}")
    pool = np.arange(n_old, N)
    diag0 = np.maximum(np.diagonal(R).copy(), 0.0)
    # the old landmarks' own residual, floored at round-off of the data's scale (exact in-span data)
    level = max(float(diag0[:n_old].mean()) if n_old else 0.0, 1e-10 * float(np.mean(np.square(D))))
    before = float(diag0[pool].mean()) if pool.size else 0.0
    energy = (float(np.mean(beta[pool])) if beta is not None and pool.size else before + level)
    share = max(0.0, before - tolerance * level) / energy if energy > 0 else 0.0
    cap = n_select // 2 if max_new is None else int(max_new)
    must = max(0, n_select - n_old)  # growing the landmark set: these picks are not optional
    budget = min(max(min(int(round(share * n_select)), cap), must), pool.size, n_select)
    diag = diag0.copy()
    F = np.zeros((N, budget))
    picks: list[int] = []
    eligible = np.zeros(N, dtype=bool)
    eligible[pool] = True
    while len(picks) < budget and diag[pool].mean() > tolerance * level:
        w = np.where(eligible, diag, 0.0)
        total = w.sum()
        if total <= 0:
            break
        s = int(np.argmax(w)) if greedy else int(rng.choice(N, p=w / total))
        t = len(picks)
        g = R[:, s] - F[:, :t] @ F[s, :t]
        eligible[s] = False
        if g[s] <= 0:
            continue
        F[:, t] = g / np.sqrt(g[s])
        diag = np.maximum(diag - F[:, t] ** 2, 0.0)
        picks.append(s)
    left = budget - len(picks)
    w = np.where(eligible, diag0, 0.0)
    if left > 0 and (w > 0).any():
        k = min(left, int((w > 0).sum()))
        more = np.argsort(-w)[:k] if greedy else rng.choice(N, size=k, replace=False, p=w / w.sum())
        picks.extend(int(i) for i in more)
    if len(picks) < must:  # the residual is exhausted but the set must grow: spread the rest by max–min
        current = np.concatenate([np.arange(n_old), np.asarray(picks, dtype=np.int64)])
        more = maxmin_select(n_old + must, D=D, required=current)[current.size:]
        picks.extend(int(i) for i in more)
    new = np.asarray(picks, dtype=np.int64)
    n_keep = n_select - new.size
    old = np.arange(n_old)
    if n_keep < n_old:
        members = np.concatenate([old, new])
        kept = thin_crowded(D, members, np.arange(members.size) < n_old, n_old - n_keep)
    else:
        kept = np.concatenate([old, new])
    sel = np.sort(kept)
    return sel, {"new": new, "dropped_old": int(n_old - (sel < n_old).sum()), "budget": budget,
                 "residual_before": before, "residual_after": float(diag[pool].mean()) if pool.size else 0.0,
                 "landmark_residual": level}
