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
  2024), dropping the old landmarks the recent stream no longer visits.

Selection loops run once per chosen landmark over whole candidate arrays;
they are refit-time work, not per-object streaming work.
"""

from __future__ import annotations

import numpy as np
import scipy.spatial.distance

from .errors import InputError

__all__ = ["SELECTIONS", "maxmin_select", "random_select", "kmeanspp_select", "residual_pivoted_select",
           "least_supported"]

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


def least_supported(D_old_to_recent: np.ndarray, n_remove: int, k: int = 10) -> np.ndarray:
    """The ``n_remove`` old landmarks the recent stream visits least (indices into the rows).

    Support of a landmark = distance to its k-th nearest recent object
    (D_old_to_recent (n, m)); the largest distances go first: those landmarks
    no longer carry the map of the current data. Ties keep the lower index.
    """
    D = np.asarray(D_old_to_recent, dtype=np.float64)
    n, m = D.shape
    if not 0 <= n_remove <= n:
        raise InputError(f"cannot remove {n_remove} of {n} landmarks")
    if m == 0 or n_remove == 0:
        return np.arange(n_remove, dtype=np.int64)
    kk = min(k, m)
    far = np.partition(D, kk - 1, axis=1)[:, kk - 1]
    return np.sort(np.argsort(-far, kind="stable")[:n_remove]).astype(np.int64)


def residual_pivoted_select(
    n_select: int,
    R: np.ndarray,
    D: np.ndarray,
    n_old: int,
    rng: np.random.Generator,
    *,
    greedy: bool = False,
    max_new: int | None = None,
    tolerance: float = 1.25,
    quantile: float = 0.99,
    support_k: int = 10,
) -> tuple[np.ndarray, dict]:
    """Keep the old landmarks that still carry the map; add what it does not explain (randomly pivoted Cholesky).

    Candidates 0..n_old-1 are the old landmarks, the others the reservoir
    (recent objects). ``R`` is the residual kernel of the current
    d-dimensional map over the candidates, R = K − Ŷ_d Ŷ_dᵀ (docs/math.md
    §7): its diagonal is each candidate's unexplained energy u = β − ‖ŷ‖².

    1. Off the map: a reservoir object is off the map when its u exceeds
       ``tolerance`` × the ``quantile`` of the old landmarks' own u (what the
       map leaves unexplained of nearly every landmark). The budget of new
       landmarks is the share of the reservoir off the map, less the
       1 − ``quantile`` a stationary stream shows, times ``n_select`` (whole
       landmarks, at most ``max_new``): a stream the map explains gets none;
       one a fifth of which left the map gets about a fifth of the landmarks.
    2. Span: new landmarks are drawn from the reservoir with probability ∝
       the current diagonal of R (``greedy``: its largest) and R is updated by
       each pivot's Cholesky column (RPCholesky: Chen, Epperly, Tropp,
       Webber), so every pick goes to what the earlier ones still leave
       unexplained, until no reservoir object is off the map any more.
    3. Weight: budget left after that is drawn uniformly from the objects
       that were off the map, so the new region gets landmarks like its
       density (a d-dimensional map follows the landmarks' second moments).
    4. Room: the old landmarks the recent stream visits least (largest
       distance to their ``support_k``-th nearest reservoir object) are
       dropped; the others stay, so the Procrustes alignment rests on many
       shared landmarks and the map moves little.

    Args:
        n_select: landmarks of the new set.
        R: (N, N) residual kernel (squared-distance units); negative diagonal
            entries (non-Euclidean input) count as 0.
        D: (N, N) dissimilarities (for the support and for growth).
        n_old: old landmarks among the candidates (the first rows).
        rng: randomness of the picks (unused when ``greedy``).
    Returns:
        (sorted indices (n_select,), details: {"new": picks in order, "dropped_old",
        "budget", "off_share", "residual_before", "residual_after": reservoir mean u
        before and after the picks, "landmark_cut": the off-the-map level}).
    """
    R = np.asarray(R, dtype=np.float64)
    D = np.asarray(D, dtype=np.float64)
    N = R.shape[0]
    _check_count(n_select, N)
    if R.shape != (N, N) or D.shape != (N, N) or not 0 <= n_old <= N:
        raise InputError(f"residual_pivoted_select needs R and D of shape (N, N) and 0 ≤ n_old ≤ N, got "
                         f"{R.shape}, {D.shape}, n_old={n_old}")
    pool = np.arange(n_old, N)
    diag0 = np.maximum(np.diagonal(R).copy(), 0.0)
    own = float(np.quantile(diag0[:n_old], quantile)) if n_old else 0.0
    # floored at round-off of the data's scale: exact in-span data has u ≈ 0 everywhere
    cut = tolerance * max(own, 1e-10 * float(np.mean(np.square(D))))
    off = np.zeros(N, dtype=bool)
    off[pool] = diag0[pool] > cut
    # less the share of the map's own landmarks above its quantile: what a stationary stream shows
    share = max(0.0, float(off[pool].mean()) - (1.0 - quantile)) if pool.size else 0.0
    cap = n_select if max_new is None else int(max_new)
    must = max(0, n_select - n_old)  # growing the landmark set: these picks are not optional
    budget = min(max(min(int(share * n_select), cap), must), pool.size, n_select)
    diag = diag0.copy()
    F = np.zeros((N, budget))
    picks: list[int] = []
    eligible = np.zeros(N, dtype=bool)
    eligible[pool] = True
    while len(picks) < budget and (diag[pool] > cut).any():
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
    rest = np.flatnonzero(eligible & off)
    left = min(budget - len(picks), rest.size)
    if left > 0:
        more = rest[np.argsort(-diag0[rest], kind="stable")[:left]] if greedy else rng.choice(rest, left, replace=False)
        picks.extend(int(i) for i in more)
    if len(picks) < must:  # nothing left off the map but the set must grow: spread the rest by max–min
        current = np.concatenate([np.arange(n_old), np.asarray(picks, dtype=np.int64)])
        picks.extend(int(i) for i in maxmin_select(n_old + must, D=D, required=current)[current.size:])
    new = np.asarray(picks, dtype=np.int64)
    n_drop = max(0, n_old - (n_select - new.size))
    drop = least_supported(D[np.ix_(np.arange(n_old), pool)], n_drop, support_k)
    sel = np.sort(np.concatenate([np.setdiff1d(np.arange(n_old), drop), new]))
    return sel, {"new": new, "dropped_old": n_drop, "budget": budget, "off_share": share,
                 "residual_before": float(diag0[pool].mean()) if pool.size else 0.0,
                 "residual_after": float(diag[pool].mean()) if pool.size else 0.0, "landmark_cut": cut}
