"""Landmark refits aligned to the previous map (docs/math.md §5, §7).

A refit chooses a new landmark set from the old landmarks and recent objects
whose mutual dissimilarities are known, fits classical MDS on it, and aligns
the new configuration to the old frame by orthogonal Procrustes (rotation or
reflection plus translation, no scaling), so downstream coordinates stay
comparable. The alignment is fitted on every old landmark: the old landmarks
are part of the candidate set, so their dissimilarities to the new
landmarks are known and the new model can place them; their old positions
are the targets. The RMS distance left after alignment is recorded.

The landmark set is chosen by ``selection``: "adaptive" (default,
``core.refit.policy``: keep the map, repair it or redraw it, whichever
places the recent objects best for the least movement of the old map; a
refit that gains too little is *kept*, not installed), "residual" (keep the
old landmarks the stream still visits and add what the map does not explain
by randomly pivoted Cholesky on its residual kernel, docs/math.md §7.5), or a
redraw of every landmark by a ``core.refit.landmarks`` strategy. A refit that would
change nothing returns outcome "kept" with its reason instead of a new version.

``candidate_dissimilarities`` assembles the candidates' (N, N)
dissimilarities from the old model's landmark data and the reservoir's
arrays. Pure computation: the caller decides where it runs (a worker process
in the daemon) and where the result is written.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..inputs.metrics import DEFAULT_METRIC, resolve_metric
from ..model import LandmarkModel, fit_model
from ..options import DEFAULTS
from .landmarks import LANDMARK_SELECTIONS, select_landmarks
from .selections import DEFAULT_SELECTION, REFIT_SELECTIONS
from .policy import assess, plan_refit
from .procrustes import orthogonal_procrustes_align
from .strategies import residual_pivoted_select

__all__ = ["RefitResult", "CandidateSet", "candidate_dissimilarities", "residual_kernel", "choose_landmarks",
           "refit", "DEFAULT_SELECTION", "REFIT_SELECTIONS"]

# REFIT_SELECTIONS and DEFAULT_SELECTION live in core.refit.selections: the configuration lists them without
# importing the refit code (docs/performance.md, start-up)


@dataclass
class RefitResult:
    """A refitted, aligned model and what an operator needs to know about it.

    Attributes:
        model: the new ``LandmarkModel`` (version = old + 1, same lineage), aligned; None when kept.
        outcome: "installed" or "kept" (nothing changes: ``reason`` says why).
        reason: one sentence for the log.
        rotation: (d, d) orthogonal R of the alignment y ↦ y·R + shift.
        shift: (d,) translation.
        alignment_rms: RMS distance between old landmarks placed by the new
            model (aligned) and their old positions (distance units).
        old_ids, new_ids: landmark ids before and after.
        eigenvalues: (d,) the new kept eigenvalues.
        duration_seconds: wall time of selection + fit + alignment.
        details: n_candidates, kept_old, selection, and the strategy's own figures.
    """

    model: LandmarkModel | None
    rotation: np.ndarray
    shift: np.ndarray
    alignment_rms: float
    old_ids: list[str]
    new_ids: list[str]
    eigenvalues: np.ndarray
    duration_seconds: float
    details: dict[str, Any] = field(default_factory=dict)
    outcome: str = "installed"
    reason: str = ""


@dataclass
class CandidateSet:
    """Refit candidates: the old landmarks first, then reservoir objects not already landmarks.

    Attributes:
        D: (N, N) dissimilarities among the candidates.
        ids: N ids (the first ``n_old`` are the old landmark ids, in order).
        features: (N, p) features in feature mode, else None.
        n_old: number of old landmarks.
    """

    D: np.ndarray
    ids: list[str]
    features: np.ndarray | None
    n_old: int


def candidate_dissimilarities(
    old_ids: Sequence[Any],
    candidate_ids: Sequence[Any],
    *,
    old_dissimilarities: np.ndarray | None = None,
    cross_to_landmarks: np.ndarray | None = None,
    mutual: np.ndarray | None = None,
    old_features: np.ndarray | None = None,
    features: np.ndarray | None = None,
    metric: Any = DEFAULT_METRIC,
    objects: np.ndarray | None = None,
) -> CandidateSet:
    """Dissimilarities among old landmarks ∪ reservoir, from arrays (no model needed).

    Objects (``objects`` (k,) strings, bytes or series, ``core.inputs.objects``): the
    candidates' mutual dissimilarities are computed by ``metric`` (a name or a ``Metric``), their
    dissimilarities to the old landmarks taken from ``cross_to_landmarks`` (k, n) when given, else
    computed against ``old_features`` (the model's landmark objects); the old landmarks' among
    themselves are ``old_dissimilarities``. The set keeps the stacked objects when the old landmarks
    have theirs (a refitted model keeps its landmark objects), else none.

    Feature mode (``features`` given): the old landmarks' ``old_features``
    (n, p) and the candidates' ``features`` (k, p) are stacked and compared
    with ``metric`` (``core.inputs.metrics``). Dissimilarity mode: the old landmarks'
    ``old_dissimilarities`` (n, n), the candidates' ``cross_to_landmarks``
    (k, n) and their ``mutual`` dissimilarities (k, k) are assembled into
    one symmetric matrix. Candidates whose id is already a landmark id are
    dropped (their rows would repeat a landmark).

    Raises:
        InputError: the arrays needed for the mode are missing or mis-shaped.
    """
    old = [str(x) for x in old_ids]
    n_old = len(old)
    taken = set(old)
    cand = [str(x) for x in candidate_ids]
    keep = np.asarray([i for i, x in enumerate(cand) if x not in taken], dtype=np.int64)
    ids = old + [cand[i] for i in keep]
    if objects is not None:
        return _object_candidates(ids, n_old, keep, old_dissimilarities, cross_to_landmarks, old_features, objects,
                                  metric)
    if features is not None:
        if old_features is None:
            raise InputError("feature candidates but the model has no landmark features")
        F = np.asarray(features, dtype=np.float64)
        F_old = np.asarray(old_features, dtype=np.float64)
        if F.ndim != 2 or F_old.shape != (n_old, F.shape[1]) or F.shape[0] != len(cand):
            raise InputError(f"features must be (k, p) with one row per candidate id and old_features (n, p); got "
                             f"{F.shape}, {F_old.shape}, {len(cand)} ids, {n_old} landmarks")
        stacked = np.vstack([F_old, F[keep]])
        D = resolve_metric(metric).pairwise(stacked)
        return CandidateSet(D, ids, stacked, n_old)
    if old_dissimilarities is None:
        raise InputError("the model does not store its landmark dissimilarities; refit impossible")
    if cross_to_landmarks is None or mutual is None:
        raise InputError("dissimilarity candidates need cross_to_landmarks (k, n) and mutual (k, k)")
    A = np.asarray(cross_to_landmarks, dtype=np.float64)
    C = np.asarray(mutual, dtype=np.float64)
    D_old = np.asarray(old_dissimilarities, dtype=np.float64)
    k = len(cand)
    if D_old.shape != (n_old, n_old) or A.shape != (k, n_old) or C.shape != (k, k):
        raise InputError(f"expected old dissimilarities ({n_old}, {n_old}), cross_to_landmarks ({k}, {n_old}) and "
                         f"mutual ({k}, {k}); got {D_old.shape}, {A.shape}, {C.shape}")
    m = keep.size
    D = np.zeros((n_old + m, n_old + m))
    D[:n_old, :n_old] = D_old
    D[n_old:, :n_old] = A[keep]
    D[:n_old, n_old:] = A[keep].T
    D[n_old:, n_old:] = C[np.ix_(keep, keep)]
    return CandidateSet(D, ids, None, n_old)


def _object_candidates(ids: list[str], n_old: int, keep: np.ndarray, D_old: np.ndarray | None,
                       cross: np.ndarray | None, old_objects: np.ndarray | None, objects: np.ndarray,
                       metric: Any) -> CandidateSet:
    """``candidate_dissimilarities`` of recent objects (see there): the metric computes what is not known."""
    m = resolve_metric(metric)
    new = np.asarray(objects, dtype=object)[keep] if np.asarray(objects).dtype == object else np.asarray(objects)[keep]
    if D_old is None:
        if old_objects is None:
            raise InputError("the model keeps neither its landmark dissimilarities nor its landmark objects")
        D_old = m.pairwise(old_objects)
    n = n_old + keep.size
    D = np.zeros((n, n))
    D[:n_old, :n_old] = np.asarray(D_old, dtype=np.float64)
    if cross is not None:
        A = np.asarray(cross, dtype=np.float64)[keep]
    elif old_objects is not None:
        A = m(new, old_objects)
    else:
        raise InputError("candidate objects need their dissimilarities to the old landmarks (the rows) or the "
                         "model's landmark objects")
    if A.shape != (keep.size, n_old):
        raise InputError(f"cross_to_landmarks must be ({keep.size}, {n_old}) for the kept candidates, got {A.shape}")
    D[n_old:, :n_old] = A
    D[:n_old, n_old:] = A.T
    D[n_old:, n_old:] = m.pairwise(new)
    stacked = None if old_objects is None else np.concatenate([np.asarray(old_objects), new])
    return CandidateSet(D, ids, stacked, n_old)


def residual_kernel(old: Any, D_candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, β): R = K − Ŷ_d Ŷ_dᵀ over the candidates, the current map's residual kernel (docs/math.md §7).

    K is the landmark-centred kernel of the candidates (docs/math.md §2, block
    form), from their dissimilarities to the old landmarks (the first
    n = ``old.n_landmarks`` columns) and to each other; Ŷ_d their projections
    on the old map in its natural frame. Only ``old.place`` and
    ``old.embedding`` are used: the map's outputs are ŷ·Q + t with Q
    orthogonal, and the landmarks' natural coordinates are centred, so
    t = mean(embedding) and Ŷ_d Ŷ_dᵀ = (Y − t)(Y − t)ᵀ. For a model that
    transforms its input (geodesics, an additive constant) K is that of the
    raw dissimilarities: an approximation. R (N, N) and β (N,) (the diagonal
    of K), squared-distance units; diag R is the unexplained energy β − ‖ŷ‖².
    """
    D = np.asarray(D_candidates, dtype=np.float64)
    n = int(old.n_landmarks)
    y = np.asarray(old.place(D[:, :n], method="projection").y, dtype=np.float64)
    if not np.isfinite(y).all():
        raise InputError("residual selection needs the map's projection of every candidate (a CMDS map and valid rows)")
    y = y - np.asarray(old.embedding, dtype=np.float64).mean(axis=0)
    R = np.square(D)
    abar = R[:, :n].mean(axis=1)
    g = float(R[:n, :n].mean())
    R -= abar[:, None]
    R -= abar[None, :]
    R += g
    R *= -0.5
    beta = np.diagonal(R).copy()
    R -= y @ y.T
    return R, beta


def choose_landmarks(
    selection: str,
    D_candidates: np.ndarray,
    n_select: int,
    n_old: int,
    old: Any = None,
    seed: int = 0,
    **options: Any,
) -> tuple[np.ndarray | None, dict[str, Any]]:
    """Sorted indices of the new landmarks among the candidates (None: keep the map), and what the strategy reports.

    Args:
        selection: one of ``REFIT_SELECTIONS``: "adaptive" (``core.refit.policy``: keep,
            repair or redraw, measured on the recent objects), "residual" (``residual_pivoted_select``),
            or a redraw by a strategy of ``core.refit.landmarks.select_landmarks`` over every candidate.
        D_candidates: (N, N); the first ``n_old`` are the old landmarks.
        n_select: landmarks to choose.
        old: the current model (needed by "adaptive" and "residual").
        seed: randomness of the choices.
        options: "adaptive": ``min_gain``; "residual": passed to ``residual_pivoted_select``.
    """
    if selection not in REFIT_SELECTIONS:
        raise InputError(f"selection must be one of {REFIT_SELECTIONS}, got {selection!r}")
    if selection not in LANDMARK_SELECTIONS and old is None:  # adaptive, residual: measured on the current map
        raise InputError(f"selection={selection!r} needs the current model")
    if selection == "adaptive":
        plan = plan_refit(D_candidates, n_old, n_select, old.embedding, int(old.n_components), seed=seed, **options)
        return plan.landmarks, {"plan": plan.action, "reason": plan.reason, "candidate": plan.candidate, **plan.details}
    if selection == "residual":
        R, _ = residual_kernel(old, D_candidates)
        sel, info = residual_pivoted_select(n_select, R, D_candidates, n_old, np.random.default_rng(seed), **options)
        return sel, {"new_from_reservoir": int(info["new"].size), "dropped_old": info["dropped_old"],
                     "off_map_share": info["off_share"], "reservoir_residual_before": info["residual_before"],
                     "reservoir_residual_after": info["residual_after"], "off_map_level": info["landmark_cut"]}
    d = DEFAULTS["n_components"] if old is None else int(old.n_components)
    return select_landmarks(selection, n_select, D=D_candidates, seed=seed, n_components=d,
                            population=np.arange(n_old, D_candidates.shape[0])
                            if n_old < D_candidates.shape[0] else None), {}


def _fit_model(old: Any, D_new: np.ndarray, ids: list[str], features: np.ndarray | None) -> Any:
    """The one place a refit builds its model: the old model's parameters, version + 1, same lineage."""
    model = fit_model(D_new, **old.fit_params, n_components=int(old.n_components), landmark_ids=ids,
                      features=None if features is None else np.asarray(features), metric=old.metric,
                      random_state=old.random_state, n_threads=old.n_threads, kernel_bandwidth=old.kernel_bandwidth)
    return model.with_version(int(old.version) + 1, lineage=old.lineage)


def refit(
    old: Any,
    D_candidates: np.ndarray,
    candidate_ids: list[str],
    n_landmarks: int | None = None,
    features: np.ndarray | None = None,
    selection: str = DEFAULT_SELECTION,
    seed: int = 0,
    **selection_options: Any,
) -> RefitResult:
    """Refit the landmark map on old landmarks ∪ recent objects, or say why the map is kept.

    Args:
        old: the current ``LandmarkModel`` (its outputs define the frame).
        D_candidates: (N, N) dissimilarities among the candidates; the first
            ``old.n_landmarks`` rows/columns must be the old landmarks, in
            their order (``candidate_dissimilarities`` builds it).
        candidate_ids: N ids (the first n are the old landmark ids).
        n_landmarks: size of the new landmark set (default: the old size).
        features: (N, p) candidate features in feature mode (kept with the model).
        selection: how the new landmarks are chosen (``choose_landmarks``).
        seed: for the randomised selections.
        selection_options: for "adaptive" or "residual" (``choose_landmarks``).
    Returns:
        a ``RefitResult`` whose ``outcome`` is "installed" (a new, aligned model) or "kept"
        (``model`` None, ``reason`` says why: the policy found no better map, or the selection
        chose the old landmarks again). Either way ``details`` carries the figures measured
        on the recent objects (``core.refit.policy``).
    """
    if old.input_kind == "similarity":
        raise InputError("refits of input='similarity' models are not supported: the candidates carry "
                         "dissimilarities, not similarities; refit with LandmarkMDS.fit on a new kernel matrix")
    t0 = time.perf_counter()
    n_old = int(old.n_landmarks)
    D_candidates = np.asarray(D_candidates, dtype=np.float64)
    N = D_candidates.shape[0]
    if D_candidates.shape != (N, N) or len(candidate_ids) != N:
        raise InputError(f"refit needs square candidate dissimilarities with one id each, got {D_candidates.shape} "
                         f"and {len(candidate_ids)} ids")
    if n_old > N or list(candidate_ids[:n_old]) != [str(x) for x in old.landmark_ids]:
        raise InputError("the first candidates must be the old landmarks, in the model's order")
    if not np.isfinite(D_candidates).all():
        raise InputError("the candidates' dissimilarities are not all finite")
    n_new = min(n_old if n_landmarks is None else int(n_landmarks), N)
    sel, info = choose_landmarks(selection, D_candidates, n_new, n_old, old=old, seed=seed, **selection_options)
    old_ids = [str(x) for x in old.landmark_ids]
    base = {"n_candidates": N, "selection": selection, **info}
    if sel is None or (sel.size == n_old and np.array_equal(sel, np.arange(n_old))):
        reason = info.get("reason") if sel is None else \
            "the selection chose the same landmarks: the map would not change"
        return RefitResult(model=None, rotation=np.eye(int(old.n_components)), shift=np.zeros(int(old.n_components)),
                           alignment_rms=0.0, old_ids=old_ids, new_ids=old_ids, eigenvalues=old.eigenvalues.copy(),
                           duration_seconds=time.perf_counter() - t0, details={**base, "kept_old": n_old},
                           outcome="kept", reason=str(reason))
    if "captured_before" not in info:  # the same figures for every selection, on the same recent objects
        base.update(assess(D_candidates, n_old, sel, old.embedding, int(old.n_components), seed=seed))
    ids = [str(candidate_ids[i]) for i in sel]
    model = _fit_model(old, D_candidates[np.ix_(sel, sel)], ids,
                       None if features is None else np.asarray(features)[sel])
    # a SMACOF/Sammon map has no projection: place the old landmarks by its stress criterion
    placement = "projection" if model.landmark_map is None else "stress"
    placed = model.place(D_candidates[np.ix_(np.arange(n_old), sel)], method=placement).y
    R, shift, rms = orthogonal_procrustes_align(placed, old.embedding)
    model = model.aligned(R, shift)
    return RefitResult(
        model=model,
        rotation=R,
        shift=shift,
        alignment_rms=rms,
        old_ids=old_ids,
        new_ids=ids,
        eigenvalues=model.eigenvalues.copy(),
        duration_seconds=time.perf_counter() - t0,
        details={**base, "kept_old": int((sel < n_old).sum())},
        outcome="installed",
        reason=str(info.get("reason") or f"{selection}: {int((sel >= n_old).sum())} new landmarks"),
    )
