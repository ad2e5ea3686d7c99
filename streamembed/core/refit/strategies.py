"""The landmark selection strategies (docs/math.md §5, §7.5; ``core.refit.landmarks`` describes each and holds
``select_landmarks``, the one entry point).

Each strategy returns indices among N objects; ``residual_pivoted_select`` (refits) keeps old landmarks and adds
what the current map does not explain. Selection loops run once per landmark over whole arrays: fit- and
refit-time work, not per-object streaming work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from ..inputs.metrics import DEFAULT_METRIC
from ..inputs.dissimilarities import CHUNK, Dissimilarities, as_dissimilarities
from ..runtime import single_blas_thread

__all__ = ["maxmin_select", "random_select", "kmeanspp_select", "kmedoids_select", "rpcholesky_select",
           "captured_variance", "residual_pivoted_select", "least_supported"]


#: Largest k-medoids cell whose medoid is chosen exactly (a random sample of this many above).
CELL_SAMPLE = 2000


def check_count(n_select: int, N: int) -> None:
    """Refuse (``InputError``) a selection of ``n_select`` objects out of ``N`` unless 1 <= n_select <= N."""
    if not 1 <= n_select <= N:
        raise InputError(f"n_select must be between 1 and {N}, got {n_select}")


def maxmin_select(
    n_select: int,
    D: np.ndarray | Dissimilarities | None = None,
    X: np.ndarray | None = None,
    metric: str = DEFAULT_METRIC,
    first: int = 0,
    required: np.ndarray | None = None,
) -> np.ndarray:
    """Indices of ``n_select`` objects chosen by max–min selection, in order of choice.

    Each new pick is the object farthest from all picks so far, which spreads
    landmarks over the data and keeps outliers of the current stream in view.
    Give either a full dissimilarity matrix D (N, N) or features X (N, p) with
    a metric (``core.inputs.metrics``; distances are then computed one row at a time, O(N·p) memory).

    Args:
        n_select: how many to choose (≤ N).
        first: the first pick when ``required`` is empty.
        required: indices that must be kept (e.g. old landmarks); picked first.
    """
    dis = as_dissimilarities(D, X, metric)
    N = dis.N
    check_count(n_select, N)
    picks = [int(i) for i in (required if required is not None else [])][:n_select]
    if not picks:
        picks = [int(first)]
    mind = np.full(N, np.inf)
    for i in picks:
        mind = np.minimum(mind, dis.rows([i])[0])
    mind[picks] = -1.0
    while len(picks) < n_select:
        i = int(np.argmax(mind))
        picks.append(i)
        mind = np.minimum(mind, dis.rows([i])[0])
        mind[i] = -1.0
    return np.asarray(picks, dtype=np.int64)


def random_select(n_select: int, N: int, rng: np.random.Generator) -> np.ndarray:
    """``n_select`` of N indices uniformly without replacement (sorted)."""
    check_count(n_select, N)
    return np.sort(rng.choice(N, size=n_select, replace=False)).astype(np.int64)


def kmeanspp_select(n_select: int, D: np.ndarray | Dissimilarities | None, rng: np.random.Generator,
                    first: int | None = None, X: np.ndarray | None = None, metric: str = DEFAULT_METRIC) -> np.ndarray:
    """k-means++ seeding on dissimilarities: picks in order of choice.

    The first pick is ``first`` (default: uniform); each next one is drawn with
    probability ∝ min_{picks} δ²(i, pick). Stops early, with fewer picks,
    when every remaining object duplicates a pick (all its δ to the picks are 0).
    """
    dis = as_dissimilarities(D, X, metric)
    N = dis.N
    check_count(n_select, N)
    picks = [int(rng.integers(N)) if first is None else int(first)]
    d2 = np.square(dis.rows(picks)[0])
    d2[picks[0]] = 0.0
    while len(picks) < n_select:
        w = np.maximum(d2, 0.0)
        total = w.sum()
        if not total > 0:
            break
        i = int(rng.choice(N, p=w / total))
        picks.append(i)
        d2 = np.minimum(d2, np.square(dis.rows([i])[0]))
        d2[i] = 0.0
    return np.asarray(picks, dtype=np.int64)


def kmedoids_select(n_select: int, dis: Dissimilarities, rng: np.random.Generator, iterations: int = 5) -> np.ndarray:
    """k-means++ seeding followed by ``iterations`` alternating medoid updates (Voronoi iteration).

    Each object joins its nearest medoid's cell; each medoid then moves to the
    member of its cell whose dissimilarities to the cell sum least. Stops when
    no medoid moves. Returns the medoids in seeding order. A cell of more than
    ``CELL_SAMPLE`` members is scored on a random sample of that many (as
    candidates and as the sum's terms), so memory stays O(N n + CELL_SAMPLE²).
    """
    L = kmeanspp_select(n_select, dis, rng)
    for _ in range(iterations):
        cell = np.argmin(np.vstack([dis.rows(L[i:i + CHUNK]) for i in range(0, L.size, CHUNK)]), axis=0)
        moved = L.copy()
        for c in range(L.size):
            members = np.flatnonzero(cell == c)
            if members.size > CELL_SAMPLE:
                members = np.union1d(rng.choice(members, CELL_SAMPLE, replace=False), L[c:c + 1])
            if members.size > 1:
                moved[c] = members[int(np.argmin(dis.block(members, members).sum(axis=1)))]
        if np.array_equal(moved, L) or np.unique(moved).size < L.size:
            break
        L = moved
    return L


def rpcholesky_select(n_select: int, dis: Dissimilarities, rng: np.random.Generator,
                      required: np.ndarray | None = None) -> np.ndarray:
    """Randomly pivoted Cholesky on the population's centred kernel K = −½ J Δ² J (N, N); picks in order.

    K(i, j) = −½ (δ²(i, j) − m_i − m_j + g) with m the row means of Δ² and g
    their mean (docs/math.md §2). Each pivot is drawn ∝ the diagonal of the
    residual K − F Fᵀ left by the pivots so far (F their Cholesky columns,
    ``required`` pivoted first); memory O(N · n_select). When the residual is
    exhausted (a kernel of rank below ``n_select``, as features of low
    dimension give), the remaining picks follow k-means++ sampling.
    """
    with single_blas_thread():  # a product with the Cholesky columns per pick: two BLAS threads only contend
        return _rpcholesky(n_select, dis, rng, required)


def _rpcholesky(n_select: int, dis: Dissimilarities, rng: np.random.Generator,
                required: np.ndarray | None) -> np.ndarray:
    """The body of ``rpcholesky_select``."""
    N = dis.N
    check_count(n_select, N)
    m = dis.squared_row_means()
    g = float(m.mean())
    diag = np.maximum(m - 0.5 * g, 0.0)
    floor = 1e-12 * max(float(diag.max()), np.finfo(float).tiny)
    F = np.zeros((N, n_select))
    picks: list[int] = []
    forced = [int(i) for i in (required if required is not None else [])]
    while len(picks) < n_select:
        if forced:
            s = forced.pop(0)
        else:
            w = np.where(diag > floor, diag, 0.0)
            w[picks] = 0.0
            total = w.sum()
            if not total > 0:
                break
            s = int(rng.choice(N, p=w / total))
        t = len(picks)
        column = -0.5 * (np.square(dis.rows([s])[0]) - m - m[s] + g)
        residual = column - F[:, :t] @ F[s, :t]
        picks.append(s)
        if residual[s] > floor:
            F[:, t] = residual / np.sqrt(residual[s])
            diag = np.maximum(diag - np.square(F[:, t]), 0.0)
        diag[s] = 0.0
    if len(picks) < n_select:
        if not picks:  # a zero kernel: every object coincides with every other
            picks.append(int(rng.integers(N)))
        d2 = np.min(np.square(np.vstack([dis.rows(picks[i:i + CHUNK]) for i in range(0, len(picks), CHUNK)])), axis=0)
        d2[picks] = 0.0
        while len(picks) < n_select and d2.sum() > 0:
            i = int(rng.choice(N, p=d2 / d2.sum()))
            picks.append(i)
            d2 = np.minimum(d2, np.square(dis.rows([i])[0]))
            d2[i] = 0.0
    return np.asarray(picks, dtype=np.int64)


def captured_variance(landmarks: np.ndarray, dis: Dissimilarities, sample: np.ndarray, n_components: int) -> float:
    """Mean squared distance to their centroid of ``sample``'s projections on the map of ``landmarks``.

    The landmarks' classical MDS map (docs/math.md §1) places the sample by
    projection (§3.1); projections are orthogonal in the kernel's feature
    space, so this is the population variance the map's d-plane holds: at
    most the sum of the full classical MDS's top d eigenvalues / N, reached
    when the planes coincide. −inf when the landmarks support no d-plane.
    Only the top d eigenpairs of the landmarks' kernel are computed
    (``cmds.top_spectrum``): the projection on d axes needs no others.
    """
    from ..fit.cmds import top_spectrum
    from ..place.projection import ProjectionKernel

    L = np.asarray(landmarks, dtype=np.int64)
    sp = top_spectrum(dis.block(L, L), n_components)
    if sp is None:
        return -np.inf
    A = np.ascontiguousarray(dis.block(np.asarray(sample, dtype=np.int64), L))
    Z, _ = ProjectionKernel(sp, n_components, np.dtype(np.float64), n_threads=1)(A)
    Y = Z[:, :n_components]
    return float(np.square(Y - Y.mean(axis=0)).sum(axis=1).mean())


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
) -> tuple[np.ndarray, dict[str, Any]]:
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
    with single_blas_thread():  # a product with the Cholesky columns per pick: two BLAS threads only contend
        return _residual_pivoted(n_select, np.asarray(R, dtype=np.float64), np.asarray(D, dtype=np.float64), n_old,
                                 rng, greedy, max_new, tolerance, quantile, support_k)


def _residual_pivoted(n_select: int, R: np.ndarray, D: np.ndarray, n_old: int, rng: np.random.Generator,
                      greedy: bool, max_new: int | None, tolerance: float, quantile: float,
                      support_k: int) -> tuple[np.ndarray, dict[str, Any]]:
    """The body of ``residual_pivoted_select``."""
    N = R.shape[0]
    check_count(n_select, N)
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
