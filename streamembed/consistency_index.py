"""Roy's tractable consistency index, and the indices block of ``evaluate`` (Roy 2021; docs/math.md §8.3).

The pipeline 𝒜 is any callable X (n, p) → Y (n, d): PCA, the full classical MDS
(``quality.cmds_pipeline``), a landmark map (``landmark_pipeline``), LSDR
(``core.fit.skeleton.lsdr_embedding``). With Y = 𝒜(X) and X̂ its
reconstruction (``trustability.reconstruction``), each candidate T_ij(z) = exp(−‖z − x_i‖² / 2h²) e_j
(h the median distance between rows of X, amplitude 1) gives a perturbed input

    X̃_ij = T_ij(X̂) + (X − X̂)        (column j gains exp(−‖x̂_r − x_i‖² / 2h²) on the residual X − X̂),

the *whole* pipeline is refitted on it, and S_ij = min over μ, λ, P of ‖𝒜(X̃_ij) − 1μᵀ − λ𝒜(X)P‖²
(``trustability.procrustes_residuals``). TCI = max over the candidates of S_ij (Definition 5): all n·p
pairs (i, j), or the p coordinates of M centres chosen by farthest-point sampling (a lower bound,
:func:`farthest_point_centres`).

The refits dominate the time (one per candidate); everything else is vectorised: the perturbations come
from one (n, n) kernel matrix, the residuals from one batched SVD per block of outputs. ``progress``
(done, total) is called after every block of refits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .core.errors import InputError
from .core.inputs.metrics import DEFAULT_METRIC
from .core.runtime import single_blas_thread
from .trustability import (check_features, check_output, gaussian_gram, median_distance, procrustes_residuals,
                           reconstruction, relative_trustability, trustability_index)

__all__ = ["Pipeline", "SizedPipeline", "Progress", "ConsistencyIndex", "farthest_point_centres",
           "consistency_index", "INDEX_KEYS", "evaluate_indices", "trustability_indices", "consistency_indices",
           "landmark_pipeline"]

#: An algorithm with its settings: features (n, p) → outputs (n, d).
Pipeline = Callable[[np.ndarray], np.ndarray]
#: An algorithm asked for d outputs: (features (n, p), d) → outputs (n, d).
SizedPipeline = Callable[[np.ndarray, int], np.ndarray]
#: Called with (refits done, refits in all).
Progress = Callable[[int, int], None]
#: Outputs collected before their residuals are computed in one batch.
BLOCK = 64


@dataclass(frozen=True)
class ConsistencyIndex:
    """The tractable consistency index of a pipeline on X (n, p).

    Attributes:
        value: TCI = max over the candidates of S_ij (units of Y²; Roy's Table 2 reports value / n).
        argmax: (i, j), the object and the coordinate of the maximising candidate (the first one on a tie).
        candidates: how many candidates were refitted (n·p, or M·p with M centres).
        scores: (candidates,) every S_ij, in the order of ``centres`` × coordinates 0..p − 1.
        centres: (M,) the objects whose kernels were tried, in the order tried.
    """

    value: float
    argmax: tuple[int, int]
    candidates: int
    scores: np.ndarray
    centres: np.ndarray


def farthest_point_centres(X: np.ndarray, M: int) -> np.ndarray:
    """(min(M, n),) object indices by farthest-point sampling on squared Euclidean distances between rows of X:
    first the object nearest the centroid, then each time the object farthest from those chosen (ties: the
    lowest index)."""
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    if isinstance(M, bool) or not isinstance(M, (int, np.integer)) or M < 1:
        raise InputError(f"the number of consistency centres must be a positive integer, got {M!r}")
    m = min(int(M), n)
    first = int(np.argmin(np.square(X - X.mean(axis=0)).sum(axis=1)))
    picks = [first]
    d2 = np.square(X - X[first]).sum(axis=1)
    for _ in range(m - 1):
        nxt = int(np.argmax(d2))
        picks.append(nxt)
        d2 = np.minimum(d2, np.square(X - X[nxt]).sum(axis=1))
    return np.asarray(picks, dtype=np.int64)


def _output(Y: object, n: int, d: int | None, what: str) -> np.ndarray:
    A = np.asarray(Y, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != n or (d is not None and A.shape[1] != d):
        want = f"({n}, {d})" if d is not None else f"({n}, d)"
        raise InputError(f"the pipeline returned shape {A.shape} for {what}, expected {want}")
    if not np.isfinite(A).all():
        raise InputError(f"the pipeline returned non-finite coordinates for {what}")
    return A


def consistency_index(X: object, pipeline: Pipeline, *, centres: int | None = None,
                      progress: Progress | None = None, Y: np.ndarray | None = None) -> ConsistencyIndex:
    """The tractable consistency index of ``pipeline`` on X (n, p) (module docstring).

    Args:
        pipeline: X (n, p) → Y (n, d) with d ≤ p; refitted once per candidate, with the same settings.
        centres: None (every object: all n·p candidates) or M (M farthest-point centres × p coordinates).
        progress: called with (refits done, refits in all).
        Y: ``pipeline(X)`` when the caller has it already (else it is computed).
    Raises:
        InputError: unusable X (``trustability.check_features``), an output that is not (n, d) and finite
            or has d > p, or a refit that fails (naming the candidate).
    """
    Xc = check_features(X)
    n, p = Xc.shape
    Y0 = check_output(Xc, _output(pipeline(Xc) if Y is None else Y, n, None, "X"))
    rec = reconstruction(Xc, Y0)
    h = median_distance(Xc)
    G = gaussian_gram(rec.X_hat, Xc, h)  # G[r, i] = exp(−‖x̂_r − x_i‖² / 2h²)
    R = Xc - rec.X_hat
    order = np.arange(n, dtype=np.int64) if centres is None else farthest_point_centres(Xc, centres)
    pairs = [(int(i), j) for i in order for j in range(p)]
    with single_blas_thread():  # many small refits: BLAS threads would only contend (20x slower under load)
        scores = _scores(Xc, pipeline, Y0, R, G, pairs, progress)
    best = int(np.argmax(scores))
    return ConsistencyIndex(value=float(scores[best]), argmax=pairs[best], candidates=len(pairs), scores=scores,
                            centres=order)


def _scores(X: np.ndarray, pipeline: Pipeline, Y0: np.ndarray, R: np.ndarray, G: np.ndarray,
            pairs: list[tuple[int, int]], progress: Progress | None) -> np.ndarray:
    """(len(pairs),) S_ij of every candidate: the pipeline refitted on R + G[:, i] e_jᵀ (module docstring)."""
    n, d = Y0.shape
    total = len(pairs)
    scores = np.empty(total)
    block = np.empty((min(BLOCK, total), n, d))
    for start in range(0, total, BLOCK):
        chunk = pairs[start:start + BLOCK]
        for b, (i, j) in enumerate(chunk):
            Xt = R.copy()
            Xt[:, j] += G[:, i]
            try:
                block[b] = _output(pipeline(Xt), n, d, f"candidate (object {i}, coordinate {j})")
            except InputError as exc:
                raise InputError(f"the pipeline failed on the perturbed input of candidate (object {i}, "
                                 f"coordinate {j}): {exc}") from exc
        scores[start:start + len(chunk)] = procrustes_residuals(block[:len(chunk)], Y0)
        if progress is not None:
            progress(start + len(chunk), total)
    return scores


#: The keys of ``evaluate_indices``' block, in order (the JSON of ``evaluate --indices``).
INDEX_KEYS = ("trustability", "trustability_d", "relative_trustability", "consistency", "consistency_argmax",
              "consistency_candidates")


def _checked(X: object, n_components: int) -> tuple[np.ndarray, int]:
    Xc = check_features(X)
    d, p = int(n_components), Xc.shape[1]
    if not 1 <= d <= p:
        raise InputError(f"n_components must be between 1 and the p = {p} features, got {n_components}")
    return Xc, d


def trustability_indices(X: object, pipeline: SizedPipeline, n_components: int) -> dict[str, Any]:
    """The trustability keys of :func:`evaluate_indices` (``trustability``, ``trustability_d``,
    ``relative_trustability``): no refit on perturbed inputs, two fits of the pipeline (d = p and d)."""
    Xc, d = _checked(X, n_components)
    n, p = Xc.shape
    try:
        Yp = _output(pipeline(Xc, p), n, p, f"X at d = p = {p}")
        ti_p: float | None = trustability_index(Xc, Yp) / n
    except ValueError:  # InputError, or a library's refusal of d = p: reported as None
        ti_p = None
    Yd = _output(pipeline(Xc, d), n, d, f"X at d = {d}")
    return {"trustability": ti_p, "trustability_d": trustability_index(Xc, Yd) / n,
            "relative_trustability": relative_trustability(Xc, Yd)}


def consistency_indices(X: object, pipeline: SizedPipeline, n_components: int, *, centres: int | None = None,
                        progress: Progress | None = None) -> dict[str, Any]:
    """The consistency keys of :func:`evaluate_indices` (``consistency``, ``consistency_argmax``,
    ``consistency_candidates``): one refit of the pipeline per candidate."""
    Xc, d = _checked(X, n_components)
    n = Xc.shape[0]
    Yd = _output(pipeline(Xc, d), n, d, f"X at d = {d}")
    tci = consistency_index(Xc, lambda Z: pipeline(Z, d), centres=centres, progress=progress, Y=Yd)
    return {"consistency": tci.value / n, "consistency_argmax": [int(tci.argmax[0]), int(tci.argmax[1])],
            "consistency_candidates": int(tci.candidates)}


def evaluate_indices(X: object, pipeline: SizedPipeline, n_components: int, *, centres: int | None = None,
                     progress: Progress | None = None) -> dict[str, Any]:
    """The indices block of ``evaluate`` for one pipeline on features X (n, p), JSON-ready.

    Keys (``INDEX_KEYS``): ``trustability`` n⁻¹TI of the pipeline asked for d = p outputs (Roy's Table 1;
    None when it cannot produce p, e.g. too few positive eigenvalues), ``trustability_d`` n⁻¹TI at
    d = ``n_components``, ``relative_trustability`` TI / ‖Ỹ‖² at that d, ``consistency`` n⁻¹TCI at that d
    (Table 2), ``consistency_argmax`` [object, coordinate], ``consistency_candidates`` (n·p, or M·p with
    ``centres`` = M: the lower bound of ``evaluate --consistency-centres M``). :func:`trustability_indices`
    and :func:`consistency_indices` compute each half.
    """
    return {**trustability_indices(X, pipeline, n_components),
            **consistency_indices(X, pipeline, n_components, centres=centres, progress=progress)}


def landmark_pipeline(**params: Any) -> SizedPipeline:
    """A ``LandmarkMDS(**params)`` map of feature rows as a pipeline: fitted on X (its landmark selection, seed,
    map and method included), then every row of X placed on it. ``metric`` defaults to "euclidean".

    The map is the one ``LandmarkMDS(**params).fit(X)`` makes — the same landmarks (``kept_landmarks``, the
    estimator's rule), the same fit — without the radius calibration on the other rows, which the indices do not
    read and which took two thirds of each refit (docs/evaluation.md)."""
    def run(X: np.ndarray, d: int) -> np.ndarray:
        from .core.refit.selections import SKELETON_SELECTION
        from .estimator import LandmarkMDS
        from .estimator_inputs import kept_landmarks

        est = LandmarkMDS(**{"metric": "euclidean", **params, "n_components": d})
        if est.landmark_selection == SKELETON_SELECTION:
            return np.asarray(est.fit(X).transform(X), dtype=np.float64)
        idx = kept_landmarks(est.n_landmarks, selection=est.landmark_selection, input=est.input,
                             random_state=est.random_state, n_components=d, F=X,
                             metric=est.metric if est.input != "similarity" else DEFAULT_METRIC)
        lm = est.set_params(n_landmarks=None).fit(X if idx is None else X[idx])
        return np.asarray(lm.transform(X), dtype=np.float64)

    return run
