"""Choosing landmarks (docs/math.md §5, §7; docs/landmarks.md measures them).

``select_landmarks`` is the one entry point for a new map's landmarks (``fit``,
``LandmarkMDS(n_landmarks=...)``, the daemon's own fits and the redraws of
refits). Its strategies:

* ``"max-variance"`` (the default): ``candidates`` uniform random landmark
  sets; the one whose map captures the most variance of the whole population
  wins. The full classical MDS of all objects is the d-plane that captures
  the most (docs/math.md §5.1), so this is a direct measurement of how close
  a landmark map comes to it; one random draw alone scatters widely around it.
* ``"random"``: one uniform draw, landmarks distributed like the data.
* ``"rpcholesky"``: randomly pivoted Cholesky on the population's centred
  kernel (Chen, Epperly, Tropp, Webber 2023): each pick drawn ∝ the diagonal
  of the kernel's residual after the picks so far, a near-optimal low-rank
  approximation of the kernel in trace norm.
* ``"kmeans++"``: k-means++ seeding on dissimilarities (Arthur and
  Vassilvitskii 2007): each pick ∝ its squared dissimilarity to the nearest
  pick so far.
* ``"kmedoids"``: k-means++ seeding, then alternating (Voronoi) medoid updates
  (Park and Jun 2009): each medoid moves to the member of its cell with the
  least total dissimilarity to the cell.
* ``"maxmin"``: farthest-point selection: covers the extremes and outliers,
  whose principal plane is usually not the population's.

``residual_pivoted_select`` (refits) keeps old landmarks and adds what the
current map does not explain (docs/math.md §7.5).

Dissimilarities come as a full (N, N) matrix or as features (N, p) with a
scipy metric, computed a few rows at a time (``Dissimilarities``). Selection
loops run once per landmark over whole arrays: fit- and refit-time work, not
per-object streaming work.
"""

from __future__ import annotations

from typing import Any
import logging
from collections.abc import Callable

import numpy as np

from .runtime import single_blas_thread
from .errors import InputError

__all__ = ["SELECTIONS", "LANDMARK_SELECTIONS", "DEFAULT_LANDMARK_SELECTION", "DEFAULT_CANDIDATES",
           "Dissimilarities", "select_landmarks", "maxmin_select", "random_select", "kmeanspp_select",
           "kmedoids_select", "rpcholesky_select", "captured_variance", "residual_pivoted_select",
           "least_supported"]

log = logging.getLogger("streamembed")

#: Names accepted by ``core.refit.refit(selection=...)`` (config ``refit.selection``).
SELECTIONS = ("residual", "maxmin", "random", "kmeans++")
#: Strategies of ``select_landmarks`` (config ``model.landmark_selection``, ``fit --selection``).
LANDMARK_SELECTIONS = ("max-variance", "random", "rpcholesky", "kmeans++", "kmedoids", "maxmin")
#: The default, chosen by the measurements of docs/landmarks.md.
DEFAULT_LANDMARK_SELECTION = "max-variance"
#: Random landmark sets "max-variance" compares.
DEFAULT_CANDIDATES = 8
#: Objects of the population a candidate map is scored on (evenly spaced sample above this).
SCORE_SAMPLE = 4000
#: Rows of a feature-mode dissimilarity matrix computed at once (memory ≈ CHUNK · N floats).
CHUNK = 256
#: Largest k-medoids cell whose medoid is chosen exactly (a random sample of this many above).
CELL_SAMPLE = 2000


def _check_count(n_select: int, N: int) -> None:
    if not 1 <= n_select <= N:
        raise InputError(f"n_select must be between 1 and {N}, got {n_select}")


class Dissimilarities:
    """Rows of an (N, N) dissimilarity matrix: given whole, or computed from features on demand.

    Args:
        D: (N, N) dissimilarities, or None.
        X: (N, p) features, or None (exactly one of D, X).
        metric: scipy ``cdist`` metric for X.
    """

    def __init__(self, D: np.ndarray | None = None, X: np.ndarray | None = None, metric: str = "euclidean"):
        if (D is None) == (X is None):
            raise InputError("landmark selection needs exactly one of D (dissimilarities) or X (features)")
        self.D = None if D is None else np.asarray(D)
        self.X = None if X is None else np.asarray(X, dtype=np.float64)
        self.metric = metric
        self.N = int(self.D.shape[0] if self.D is not None else self._features().shape[0])
        self._sq_means: np.ndarray | None = None

    def rows(self, idx: np.ndarray | list[int]) -> np.ndarray:
        """(len(idx), N) float64: the dissimilarities of objects ``idx`` to every object."""
        idx = np.asarray(idx, dtype=np.int64)
        if self.D is not None:
            return np.asarray(self.D[idx], dtype=np.float64)
        import scipy.spatial.distance  # lazily: keeps `streamembed embed`'s start-up short

        X = self._features()
        return scipy.spatial.distance.cdist(X[idx], X, metric=self.metric)

    def block(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """(len(rows), len(cols)) float64 dissimilarities."""
        if self.D is not None:
            return np.asarray(self.D[np.ix_(rows, cols)], dtype=np.float64)
        import scipy.spatial.distance  # lazily: keeps `streamembed embed`'s start-up short

        X = self._features()
        return scipy.spatial.distance.cdist(X[rows], X[cols], metric=self.metric)

    def _features(self) -> np.ndarray:
        """X (N, p), for dissimilarities given by features."""
        assert self.X is not None  # one of D and X (__init__)
        return self.X

    def squared_row_means(self) -> np.ndarray:
        """(N,) mean over j of δ²(i, j): in chunks of ``CHUNK`` rows, or in O(N p) for Euclidean features
        (mean_j ‖x_i − x_j‖² = ‖x_i − x̄‖² + mean_j ‖x_j − x̄‖²)."""
        if self._sq_means is None and self.X is not None and self.metric == "euclidean":
            sq = np.square(self.X - self.X.mean(axis=0)).sum(axis=1)
            self._sq_means = sq + sq.mean()
        if self._sq_means is None:
            out = np.empty(self.N)
            for start in range(0, self.N, CHUNK):
                stop = min(start + CHUNK, self.N)
                out[start:stop] = np.square(self.rows(np.arange(start, stop))).mean(axis=1)
            self._sq_means = out
        return self._sq_means


def _as_dissimilarities(D: np.ndarray | Dissimilarities | None, X: np.ndarray | None, metric: str) -> Dissimilarities:
    return D if isinstance(D, Dissimilarities) else Dissimilarities(D, X, metric)


def maxmin_select(
    n_select: int,
    D: np.ndarray | Dissimilarities | None = None,
    X: np.ndarray | None = None,
    metric: str = "euclidean",
    first: int = 0,
    required: np.ndarray | None = None,
) -> np.ndarray:
    """Indices of ``n_select`` objects chosen by max–min selection, in order of choice.

    Each new pick is the object farthest from all picks so far, which spreads
    landmarks over the data and keeps outliers of the current stream in view.
    Give either a full dissimilarity matrix D (N, N) or features X (N, p) with
    a scipy metric (distances are then computed one row at a time, O(N·p) memory).

    Args:
        n_select: how many to choose (≤ N).
        first: the first pick when ``required`` is empty.
        required: indices that must be kept (e.g. old landmarks); picked first.
    """
    dis = _as_dissimilarities(D, X, metric)
    N = dis.N
    _check_count(n_select, N)
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
    _check_count(n_select, N)
    return np.sort(rng.choice(N, size=n_select, replace=False)).astype(np.int64)


def kmeanspp_select(n_select: int, D: np.ndarray | Dissimilarities | None, rng: np.random.Generator,
                    first: int | None = None, X: np.ndarray | None = None, metric: str = "euclidean") -> np.ndarray:
    """k-means++ seeding on dissimilarities: picks in order of choice.

    The first pick is ``first`` (default: uniform); each next one is drawn with
    probability ∝ min_{picks} δ²(i, pick). Stops early, with fewer picks,
    when every remaining object duplicates a pick (all its δ to the picks are 0).
    """
    dis = _as_dissimilarities(D, X, metric)
    N = dis.N
    _check_count(n_select, N)
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
    N = dis.N
    _check_count(n_select, N)
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
    """
    from .cmds import fit_spectrum
    from .projection import ProjectionKernel

    L = np.asarray(landmarks, dtype=np.int64)
    try:
        sp = fit_spectrum(dis.block(L, L), None, "auto", np.dtype(np.float64), n_components)
    except (ValueError, np.linalg.LinAlgError):
        return -np.inf
    d = min(n_components, sp.rank)
    if d < n_components:
        return -np.inf
    A = np.ascontiguousarray(dis.block(np.asarray(sample, dtype=np.int64), L))
    Z, _ = ProjectionKernel(sp, d, np.dtype(np.float64), n_threads=1)(A)
    Y = Z[:, :d]
    return float(np.square(Y - Y.mean(axis=0)).sum(axis=1).mean())


def _distinct(picks: np.ndarray, dis: Dissimilarities, n_select: int, rng: np.random.Generator) -> np.ndarray:
    """``picks`` without objects that duplicate an earlier pick (δ = 0), topped up to ``n_select`` if possible.

    Top-ups follow k-means++ sampling (only objects at δ > 0 from every pick
    can be drawn); fewer come back when fewer distinct objects exist (``_at_least_two`` warns).
    """
    picks = np.asarray(picks, dtype=np.int64)
    if picks.size > 1:
        B = dis.block(picks, picks)
        dup = np.triu(B <= 0.0, k=1).any(axis=0)
        picks = picks[~dup]
    if picks.size < n_select:
        d2 = np.min(np.square(np.vstack([dis.rows(picks[i:i + CHUNK]) for i in range(0, picks.size, CHUNK)])), axis=0)
        extra: list[int] = []
        while picks.size + len(extra) < n_select and d2.sum() > 0:
            i = int(rng.choice(dis.N, p=d2 / d2.sum()))
            extra.append(i)
            d2 = np.minimum(d2, np.square(dis.rows([i])[0]))
            d2[i] = 0.0
        picks = np.concatenate([picks, np.asarray(extra, dtype=np.int64)])
    return picks


def select_landmarks(
    strategy: str,
    n_select: int,
    *,
    D: np.ndarray | None = None,
    X: np.ndarray | None = None,
    metric: str = "euclidean",
    seed: int | np.random.Generator = 0,
    required: np.ndarray | None = None,
    n_components: int = 2,
    candidates: int | None = None,
    population: np.ndarray | None = None,
) -> np.ndarray:
    """Sorted indices of the landmarks among N objects (the module docstring describes each strategy).

    Args:
        strategy: one of ``LANDMARK_SELECTIONS``.
        n_select: landmarks to choose (fewer come back, with a WARNING, when
            fewer than ``n_select`` objects are distinct).
        D: (N, N) dissimilarities, or X: (N, p) features with a scipy ``metric``.
        seed: seed (or generator) of the random choices; the same seed gives the same landmarks.
        required: indices that must be among the landmarks (refits keep old ones); "maxmin" and
            "rpcholesky" build on them, the other strategies add them to their own picks.
        n_components: d of the map ("max-variance" scores d-planes).
        candidates: landmark sets compared by captured variance (default ``DEFAULT_CANDIDATES`` for
            "max-variance", 1 otherwise); with more than one, the randomised strategies return the set
            whose map captures the most variance of the population (``captured_variance``).
        population: indices of the objects whose variance scores the candidate sets (default: all N,
            an evenly spaced sample of ``SCORE_SAMPLE`` above that); refits score on recent objects only.
    Raises:
        InputError: unknown strategy, a count outside 1..N, not exactly one of D and X, or fewer than
            2 distinct objects when ``n_select`` ≥ 2 (no map can be fitted).
    """
    if strategy not in LANDMARK_SELECTIONS:
        raise InputError(f"landmark selection must be one of {LANDMARK_SELECTIONS}, got {strategy!r}")
    dis = Dissimilarities(D, X, metric)
    N = dis.N
    _check_count(n_select, N)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    req = np.unique(np.asarray(required if required is not None else [], dtype=np.int64))
    if req.size > n_select or (req.size and (req.min() < 0 or req.max() >= N)):
        raise InputError(f"required landmarks must be at most {n_select} indices in 0..{N - 1}")
    draw: dict[str, Callable[[np.random.Generator], np.ndarray]] = {
        "max-variance": lambda r: random_select(n_select, N, r),
        "random": lambda r: random_select(n_select, N, r),
        "rpcholesky": lambda r: rpcholesky_select(n_select, dis, r, required=req),
        "kmeans++": lambda r: kmeanspp_select(n_select, dis, r),
        "kmedoids": lambda r: kmedoids_select(n_select, dis, r),
        "maxmin": lambda r: maxmin_select(n_select, dis, first=int(r.integers(N)), required=req),
    }

    def one(r: np.random.Generator) -> np.ndarray:
        picks = draw[strategy](r)
        if req.size and strategy not in ("maxmin", "rpcholesky"):
            picks = np.concatenate([req, np.setdiff1d(picks, req)])[:n_select]
        return _distinct(picks, dis, n_select, r)

    k = (DEFAULT_CANDIDATES if strategy == "max-variance" else 1) if candidates is None else int(candidates)
    if k <= 1 or strategy == "maxmin":
        return _at_least_two(np.sort(one(rng)), n_select, N)
    pop = np.arange(N) if population is None else np.asarray(population, dtype=np.int64)
    sample = pop
    if pop.size > SCORE_SAMPLE:
        sample = pop[np.unique(np.linspace(0, pop.size - 1, SCORE_SAMPLE).round()).astype(np.int64)]
    sets = [one(r) for r in rng.spawn(k)]
    with single_blas_thread():  # many small eigenproblems: BLAS threads would only contend
        scores = [captured_variance(L, dis, sample, n_components) if L.size > n_components else -np.inf for L in sets]
    return _at_least_two(np.sort(sets[int(np.argmax(scores))]), n_select, N)


def initial_landmarks(
    strategy: str,
    n_select: int,
    *,
    D: np.ndarray | None = None,
    X: np.ndarray | None = None,
    metric: str = "euclidean",
    random_state: int = 0,
    n_components: int = 2,
) -> np.ndarray:
    """Sorted indices of a first map's landmarks among N objects: every object when ``n_select`` ≥ N, else
    ``select_landmarks`` seeded by the model's ``random_state``.

    The one rule of the estimator (``LandmarkMDS(n_landmarks=...)``), ``streamembed fit`` (``--seed``) and a
    generator-fitted daemon (``generator.seed``): the same objects, strategy and seed give the same landmarks
    whichever of them fits. D (N, N) dissimilarities, or X (N, p) features with their scipy ``metric``.
    """
    N = int((D if D is not None else X).shape[0])  # type: ignore[union-attr]
    if n_select >= N:
        return np.arange(N)
    return select_landmarks(strategy, n_select, D=D, X=X, metric=metric, seed=random_state,
                            n_components=n_components)


def _at_least_two(picks: np.ndarray, n_select: int, N: int) -> np.ndarray:
    """``picks``, with a WARNING naming the count when fewer than ``n_select`` objects are distinct; an
    InputError when a map was asked for and they cannot carry one (fewer than 2 distinct objects)."""
    if n_select >= 2 and picks.size < 2:
        raise InputError(f"all {N} objects are identical (every dissimilarity is 0): a map needs at least 2 distinct "
                         f"landmarks")
    if picks.size < n_select:
        log.warning("landmark selection: only %d distinct objects among %d (the others duplicate them at "
                    "dissimilarity 0); using %d landmarks instead of %d", picks.size, N, picks.size, n_select)
    return picks


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
