"""Landmark refits aligned to the previous map (MATH.md §5).

A refit chooses a new landmark set from the old landmarks and recent objects
whose mutual dissimilarities are known, fits classical MDS on it, and aligns
the new configuration to the old frame by orthogonal Procrustes (rotation or
reflection plus translation, no scaling), so downstream coordinates stay
comparable. The alignment is fitted on every old landmark: the old landmarks
are part of the candidate set, so their dissimilarities to the new
landmarks are known and the new model can place them; their old positions
are the targets. The RMS distance left after alignment is recorded.

Pure computation: the caller decides where it runs (a worker process in the
daemon) and where the result is written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .errors import InputError
from .landmarks import maxmin_select
from .model import fit_model
from .procrustes import orthogonal_procrustes_align


@dataclass
class RefitResult:
    """A refitted, aligned model and what an operator needs to know about it.

    Attributes:
        model: the new ``LandmarkModel`` (version = old + 1, same lineage), aligned.
        rotation: (d, d) orthogonal R of the alignment y ↦ y·R + shift.
        shift: (d,) translation.
        alignment_rms: RMS distance between old landmarks placed by the new
            model (aligned) and their old positions (distance units).
        old_ids, new_ids: landmark ids before and after.
        eigenvalues: (d,) the new kept eigenvalues.
        duration_seconds: wall time of selection + fit + alignment.
    """

    model: object
    rotation: np.ndarray
    shift: np.ndarray
    alignment_rms: float
    old_ids: list[str]
    new_ids: list[str]
    eigenvalues: np.ndarray
    duration_seconds: float
    details: dict = field(default_factory=dict)


def refit(
    old,
    D_candidates: np.ndarray,
    candidate_ids: list[str],
    n_landmarks: int | None = None,
    features: np.ndarray | None = None,
) -> RefitResult:
    """Refit the landmark map on old landmarks ∪ recent objects.

    Args:
        old: the current ``LandmarkModel`` (its outputs define the frame).
        D_candidates: (N, N) dissimilarities among the candidates; the first
            ``old.n_landmarks_`` rows/columns must be the old landmarks, in
            their order.
        candidate_ids: N ids (the first n are the old landmark ids).
        n_landmarks: size of the new landmark set (default: the old size).
            Chosen by max–min selection, which keeps the map's extremes and
            adds the new region of the stream.
        features: (N, p) candidate features in feature mode (kept with the model).
    """
    if old.input_kind == "similarity":
        raise InputError("refits of input='similarity' models are not supported: the candidates carry "
                         "dissimilarities, not similarities; refit with LandmarkMDS.fit on a new kernel matrix")
    t0 = time.perf_counter()
    n_old = int(old.n_landmarks)
    N = D_candidates.shape[0]
    if D_candidates.shape != (N, N) or len(candidate_ids) != N:
        raise InputError(f"refit needs square candidate dissimilarities with one id each, got {D_candidates.shape} and {len(candidate_ids)} ids")
    if N < n_old or list(candidate_ids[:n_old]) != [str(x) for x in old.landmark_ids]:
        raise InputError("the first candidates must be the old landmarks, in the model's order")
    n_new = n_old if n_landmarks is None else int(n_landmarks)
    n_new = min(n_new, N)
    sel = np.sort(maxmin_select(n_new, D=D_candidates, first=0))
    D_new = D_candidates[np.ix_(sel, sel)]
    ids = [str(candidate_ids[i]) for i in sel]
    model = fit_model(D_new, **old.fit_params, n_components=int(old.n_components), landmark_ids=ids,
                      features=None if features is None else np.asarray(features)[sel], metric=old.metric,
                      random_state=old.random_state, n_threads=old.n_threads)
    model = model.with_version(int(old.version) + 1, lineage=old.lineage)
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
        old_ids=[str(x) for x in old.landmark_ids],
        new_ids=ids,
        eigenvalues=model.eigenvalues.copy(),
        duration_seconds=time.perf_counter() - t0,
        details={"n_candidates": N, "kept_old": int((sel < n_old).sum())},
    )
