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

``"skeleton"`` (``SKELETON_SELECTION``) is no strategy of ``select_landmarks``: it chooses the skeleton of
LSDR (Roy 2021; ``core.fit.skeleton``, docs/math.md §8.4) and makes the map from geodesics, not from the
dissimilarities, so a model is fitted by ``core.skeleton_model.fit_skeleton_model`` (``LandmarkMDS(landmark_selection=
"skeleton")``, ``streamembed fit --selection skeleton``) on feature vectors with a Euclidean metric.

``residual_pivoted_select`` (refits) keeps old landmarks and adds what the
current map does not explain (docs/math.md §7.5).

The strategies themselves live in ``core.refit.strategies``; dissimilarities come as a full (N, N) matrix
or as features (N, p) with a metric, computed a few rows at a time (``core.inputs.dissimilarities``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from ..errors import InputError
from ..inputs.dissimilarities import CHUNK, Dissimilarities, as_dissimilarities
from ..inputs.metrics import DEFAULT_METRIC
from ..options import DEFAULTS
from ..runtime import single_blas_thread
from .selections import DEFAULT_LANDMARK_SELECTION, LANDMARK_SELECTIONS, SKELETON_SELECTION
from .strategies import (
    captured_variance,
    check_count,
    kmeanspp_select,
    kmedoids_select,
    maxmin_select,
    random_select,
    rpcholesky_select,
)

__all__ = ["LANDMARK_SELECTIONS", "DEFAULT_LANDMARK_SELECTION", "DEFAULT_CANDIDATES", "select_landmarks",
           "initial_landmarks"]

log = logging.getLogger("streamembed")

#: Random landmark sets "max-variance" compares.
DEFAULT_CANDIDATES = 8
#: Objects of the population a candidate map is scored on (evenly spaced sample above this).
SCORE_SAMPLE = 4000


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
    D: np.ndarray | Dissimilarities | None = None,
    X: np.ndarray | None = None,
    metric: str = DEFAULT_METRIC,
    seed: int | np.random.Generator = DEFAULTS["random_state"],
    required: np.ndarray | None = None,
    n_components: int = DEFAULTS["n_components"],
    candidates: int | None = None,
    population: np.ndarray | None = None,
) -> np.ndarray:
    """Sorted indices of the landmarks among N objects (the module docstring describes each strategy).

    Args:
        strategy: one of ``LANDMARK_SELECTIONS``.
        n_select: landmarks to choose (fewer come back, with a WARNING, when
            fewer than ``n_select`` objects are distinct).
        D: (N, N) dissimilarities, or X: (N, p) features with a ``metric`` (``core.inputs.metrics``).
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
    if strategy == SKELETON_SELECTION:
        raise InputError("landmark_selection='skeleton' chooses the LSDR skeleton and makes its map from geodesics: "
                         "it needs feature vectors with a Euclidean metric and picks its own number of landmarks; "
                         "fit it with LandmarkMDS(landmark_selection='skeleton', metric='euclidean') or `streamembed "
                         "fit --features FILE --selection skeleton`")
    if strategy not in LANDMARK_SELECTIONS:
        raise InputError(f"landmark selection must be one of {LANDMARK_SELECTIONS}, got {strategy!r}")
    dis = as_dissimilarities(D, X, metric)  # a Dissimilarities given as D is used as it is (its count goes on)
    N = dis.N
    check_count(n_select, N)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    req = np.unique(np.asarray(required if required is not None else [], dtype=np.int64))
    if req.size > n_select or (req.size and (req.min() < 0 or req.max() >= N)):
        raise InputError(f"required landmarks must be at most {n_select} indices in 0..{N - 1}")
    Draw = Callable[[np.random.Generator], np.ndarray]

    def keeping(draw: Draw) -> Draw:
        """A strategy that ignores ``required``, with the required landmarks put first among its picks."""
        if not req.size:
            return draw
        return lambda r: np.concatenate([req, np.setdiff1d(draw(r), req)])[:n_select]

    draw: dict[str, Draw] = {  # "rpcholesky" and "maxmin" build on the required landmarks themselves
        "max-variance": keeping(lambda r: random_select(n_select, N, r)),
        "random": keeping(lambda r: random_select(n_select, N, r)),
        "rpcholesky": lambda r: rpcholesky_select(n_select, dis, r, required=req),
        "kmeans++": keeping(lambda r: kmeanspp_select(n_select, dis, r)),
        "kmedoids": keeping(lambda r: kmedoids_select(n_select, dis, r)),
        "maxmin": lambda r: maxmin_select(n_select, dis, first=int(r.integers(N)), required=req),
    }

    def one(r: np.random.Generator) -> np.ndarray:
        return _distinct(draw[strategy](r), dis, n_select, r)

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
    metric: str = DEFAULT_METRIC,
    random_state: int = DEFAULTS["random_state"],
    n_components: int = DEFAULTS["n_components"],
) -> np.ndarray:
    """Sorted indices of a first map's landmarks among N objects: every object when ``n_select`` ≥ N, else
    ``select_landmarks`` seeded by the model's ``random_state``.

    The one rule of the estimator (``LandmarkMDS(n_landmarks=...)``), ``streamembed fit`` (``--seed``) and a
    generator-fitted daemon (``generator.seed``): the same objects, strategy and seed give the same landmarks
    whichever of them fits. D (N, N) dissimilarities, or X (N, p) features with their ``metric``
    (``core.inputs.metrics``).
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

