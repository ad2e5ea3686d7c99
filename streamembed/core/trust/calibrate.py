"""Calibrating the radius at fit time by split conformal prediction on the fit population (docs/math.md §9).

``calibrate`` takes a fitted model, the input rows of its non-landmark fit
objects and the dissimilarities among landmarks and those objects, and:

1. takes at most ``MAX_OBJECTS`` objects (a seeded sample beyond that) and,
   with at least ``SPLIT_MIN`` of them, splits them in two seeded halves: one
   fits the error predictor, the other calibrates;
2. computes their full-MDS positions (``full_mds.FullMap``: by default each
   half against the classical MDS of the landmarks and that half, aligned on
   the landmarks: ``TRUTH_SETS``, docs/math.md §9.1);
3. places them with each method (``METHODS``) and takes their errors
   e = y − t (d-vectors, map units);
4. fits the landmark-subset maps (``sensitivity``) and, on the first half,
   the error predictor: a ridge regression of e on the object's first q
   landmark coordinates (q = min(``MAX_COORDINATES``, monitored eigenpairs,
   half/8), docs/math.md §9.4), and κ² = mean leave-one-out residual² / mean
   σ²; without a split the score is σ alone and every object calibrates;
5. stores the ratios ‖e‖ / score of the calibrating objects: the split-conformal
   calibration set (``conformal``).

Objects at dissimilarity 0 from a landmark are that landmark (radius 0) and
are left out. Only classical-MDS maps whose input pipeline keeps the
dissimilarities as given (no geodesic distances, no additive constant) are
calibrated: elsewhere the map is not what a full classical MDS would give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from .calibration import MethodCalibration, RadiusCalibration
from ..options import DEFAULTS
from ..place.methods import kernel_methods
from ..runtime import single_blas_thread
from .conformal import DEFAULT_COVERAGE, check_coverage, min_calibration_objects
from .full_mds import FullMap, dissimilarities_from_similarities
from .sensitivity import sensitivity_maps

if TYPE_CHECKING:
    from ..model import LandmarkModel

__all__ = ["TRUTH_SETS", "METHODS", "SPLIT_MIN", "MAX_OBJECTS", "MAX_COORDINATES", "RIDGE", "Calibrated", "calibrate",
           "calibrate_on_matrix", "error_predictor", "uncalibrated_reason"]

#: The methods a calibration covers (the kernel methods of a classical-MDS map).
METHODS = kernel_methods()
#: From this many calibration objects on, half of them fit the error predictor.
SPLIT_MIN = 100
#: The full MDS of the calibration uses at most this many non-landmark objects (a seeded sample).
MAX_OBJECTS = 2000
#: The error predictor's largest number of landmark coordinates q.
MAX_COORDINATES = 16
#: Ridge penalty of the error predictor, relative to the mean diagonal of XᵀX.
RIDGE = 1e-3
#: What each calibration half is measured against (docs/math.md §9.1): the full MDS of the landmarks and that
#: half (the default), of the landmarks and every calibration object, or of that half without the landmarks.
TRUTH_SETS = ("halves", "whole", "apart")


@dataclass(frozen=True)
class Calibrated:
    """What ``calibrate`` gives: the calibration, or None and why (a sentence for a WARNING).

    ``calibrating`` and ``predicting``: the objects (indices into the rows given) whose ratios the calibration
    keeps and those that fitted the error predictor: what a benchmark needs to score other candidates on the
    same split. Not stored with the model.
    """

    calibration: RadiusCalibration | None
    reason: str = ""
    calibrating: np.ndarray | None = None
    predicting: np.ndarray | None = None


def uncalibrated_reason(model: LandmarkModel) -> str | None:
    """Why ``model``'s map cannot be calibrated (refined map, geodesic or corrected input), or None."""
    fp = model.fit_params
    if fp.get("landmark_map", "cmds") != "cmds":
        return f"landmark_map={fp.get('landmark_map')!r} is not a classical-MDS map"
    if fp.get("geodesic_neighbors") or fp.get("correction", "none") != "none":
        return "geodesic distances or an additive constant change the dissimilarities a full MDS would use"
    return None


def calibrate(model: LandmarkModel, rows: np.ndarray, D: np.ndarray, *, coverage: float = DEFAULT_COVERAGE,
              random_state: int = DEFAULTS["random_state"],
              methods: tuple[str, ...] = METHODS, truth_sets: str = "halves",
              max_objects: int = MAX_OBJECTS) -> Calibrated:
    """Calibrate ``model``'s radius on k non-landmark fit objects (see the module doc).

    Args:
        model: the fitted ``LandmarkModel``.
        rows: (k, w) the objects' model input rows (as ``place`` takes them), in the order of D's rows n..n+k-1.
        D: (n + k, n + k) dissimilarities among the n landmarks (first, in model order) and the k objects
           (for a similarity model: the equivalent dissimilarities, ``full_mds.dissimilarities_from_similarities``).
        coverage: the stated coverage c.
        random_state: seeds the sample, the split and the subset maps.
        truth_sets: one of ``TRUTH_SETS`` (docs/math.md §9.1).
        max_objects: at most this many objects calibrate (a seeded sample of the others).
    """
    with single_blas_thread():  # loops of small products and eigensolvers: one BLAS thread (core.runtime)
        return _calibrate(model, rows, D, coverage=coverage, random_state=random_state, methods=methods,
                          truth_sets=truth_sets, max_objects=max_objects)


def _calibrate(model: LandmarkModel, rows: np.ndarray, D: np.ndarray, *, coverage: float, random_state: int,
               methods: tuple[str, ...], truth_sets: str, max_objects: int) -> Calibrated:
    c = check_coverage(coverage)
    if truth_sets not in TRUTH_SETS:
        raise InputError(f"truth_sets must be one of {TRUTH_SETS}, got {truth_sets!r}")
    why = uncalibrated_reason(model)
    if why is not None:
        return Calibrated(None, f"no radius: {why}")
    n, d = int(model.n_landmarks), int(model.n_components)
    rows = np.asarray(rows)
    k = rows.shape[0]
    if D.shape != (n + k, n + k):
        raise InputError(f"D must be ({n + k}, {n + k}) for {n} landmarks and {k} objects, got {D.shape}")
    rng = np.random.default_rng(random_state)
    A = model.core_dissimilarities(rows)[0] if k else np.empty((0, n))
    apart = np.flatnonzero(A.min(axis=1) > 0) if k else np.empty(0, dtype=np.int64)
    if apart.size > max_objects:
        apart = np.sort(rng.choice(apart, max_objects, replace=False))
    need = min_calibration_objects(c)
    if apart.size < need:
        return Calibrated(None, f"no radius: {apart.size} non-landmark fit objects calibrate it, coverage {c:g} needs "
                                f"at least {need}: fit with {need - apart.size} more objects than landmarks")
    A, rows = A[apart], rows[apart]
    sp = model.spectrum
    sens = sensitivity_maps(np.asarray(D[:n, :n], dtype=np.float64), sp.eigenvectors[:, :d], sp.eigenvalues[:d],
                            sp.row_means, seed=random_state)
    if sens is None:
        return Calibrated(None, f"no radius: {n} landmarks are too few for the landmark-subset maps")
    sigma = sens.spread(A)
    kk = apart.size
    split = kk >= SPLIT_MIN and kk // 2 >= need
    perm = rng.permutation(kk)
    fit_rows, cal_rows = (perm[: kk // 2], perm[kk // 2:]) if split else (perm[:0], perm)
    truth = np.empty((kk, d))
    for part in ((fit_rows, cal_rows) if split and truth_sets in ("halves", "apart") else (perm,)):
        if truth_sets == "apart" and part.size >= d + 2:
            objs = n + apart[part]
            truth[part] = FullMap.fit_apart(D[np.ix_(objs, objs)], D[np.ix_(np.arange(n), objs)],
                                            model.embedding).positions
            continue
        keep = np.concatenate([np.arange(n), n + apart[part]])
        truth[part] = FullMap.fit(D[np.ix_(keep, keep)], np.arange(n), model.embedding).positions[n:]
    q = min(MAX_COORDINATES, sp.rank, max(d, fit_rows.size // 8))
    W = -0.5 * sp.eigenvectors[:, :q] / np.sqrt(sp.eigenvalues[:q])
    Zq = (np.square(A) - sp.row_means) @ W
    scale = float(np.sqrt(np.mean(np.sum(np.square(model.natural_embedding), axis=1))))
    tiny = 1e-12 * max(scale, np.finfo(float).tiny)
    provisional = {}
    errors = {}
    for method in methods:
        res = model.place(rows, method=method, errors="mask")
        e = res.y - truth
        ok = res.valid & np.isfinite(e).all(axis=1)
        errors[method] = (e, ok)
        if split:
            P, p0, kappa2 = error_predictor(Zq[fit_rows[ok[fit_rows]]], e[fit_rows[ok[fit_rows]]],
                                             sigma[fit_rows[ok[fit_rows]]], W, sp.row_means)
        else:
            P, p0, kappa2 = np.zeros((n, d)), np.zeros(d), 1.0
        provisional[method] = MethodCalibration(P, p0, kappa2, np.empty(0))
    cal = RadiusCalibration(coverage=c, sensitivity=sens, methods=provisional)
    final = {}
    for method, mc in provisional.items():
        e, ok = errors[method]
        idx = cal_rows[ok[cal_rows]]
        s = cal.score(A[idx], method)
        ratios = np.linalg.norm(e[idx], axis=1) / np.maximum(s, tiny)
        final[method] = MethodCalibration(mc.error_weights, mc.error_offsets, mc.kappa2, np.sort(ratios))
    info = {"objects": int(kk), "calibration_objects": int(cal_rows.size), "predictor_objects": int(fit_rows.size),
            "coordinates": int(q) if split else 0, "sampled": bool(k > kk),
            "full_mds_objects": int(n + (cal_rows.size if split and truth_sets == "halves" else kk))}
    return Calibrated(RadiusCalibration(coverage=c, sensitivity=sens, methods=final, info=info),
                      calibrating=apart[cal_rows], predicting=apart[fit_rows])


def error_predictor(Z: np.ndarray, E: np.ndarray, sigma: np.ndarray, W: np.ndarray,
                     row_means: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Ridge regression of errors E (k, d) on [Z, 1] (k, q + 1), as an affine map of centred a2: (P (n, d),
    p (d,), κ²) with κ² = mean leave-one-out residual² / mean σ² (0 when σ vanishes)."""
    X = np.hstack([Z, np.ones((Z.shape[0], 1))])
    XtX = X.T @ X
    lam = RIDGE * float(np.trace(XtX)) / X.shape[1]
    inv = np.linalg.inv(XtX + lam * np.eye(X.shape[1]))
    G = inv @ (X.T @ E)
    hat = np.einsum("ij,jk,ik->i", X, inv, X)
    loo = (E - X @ G) / np.maximum(1.0 - hat, 1e-12)[:, None]
    s2 = float(np.mean(np.square(sigma))) if sigma.size else 0.0
    kappa2 = float(np.mean(np.sum(np.square(loo), axis=1))) / s2 if s2 > 0 else 0.0
    P = W @ G[:-1]
    return P, G[-1] - row_means @ P, kappa2


def calibrate_on_matrix(model: LandmarkModel, M: np.ndarray, landmarks: np.ndarray, *,
                        coverage: float = DEFAULT_COVERAGE, random_state: int = DEFAULTS["random_state"],
                        truth_sets: str = "halves",
                        max_objects: int = MAX_OBJECTS) -> Calibrated:
    """``calibrate`` on the fit matrix itself: M (N, N) the dissimilarities (similarities for a similarity
    model) among all N fit objects, ``landmarks`` (n,) the rows of M that are the model's landmarks, in model
    order; every other row is a calibration object (a seeded sample of ``MAX_OBJECTS`` when there are more).
    Builds only the (n + k)² submatrix it needs; objects with a non-finite (or negative) entry are left out."""
    M = np.asarray(M)
    lm = np.asarray(landmarks, dtype=np.int64)
    N = M.shape[0]
    if M.ndim != 2 or M.shape[1] != N or lm.ndim != 1 or lm.size != int(model.n_landmarks):
        raise InputError(f"calibrating needs the (N, N) fit matrix and the landmarks' {model.n_landmarks} rows, "
                         f"got shapes {M.shape} and {lm.shape}")
    others = np.setdiff1d(np.arange(N), lm)
    if others.size > max_objects:
        others = np.sort(np.random.default_rng(random_state).choice(others, max_objects, replace=False))
    order = np.concatenate([lm, others])
    sub = np.asarray(M[np.ix_(order, order)], dtype=np.float64)
    bad: np.ndarray = np.logical_not(np.isfinite(sub).all(axis=1))
    if model.input_kind != "similarity":
        bad |= (sub < 0).any(axis=1)
    if bad[lm.size:].any():  # objects with a bad entry do not calibrate (the landmarks' entries were checked)
        keep = np.concatenate([np.arange(lm.size), lm.size + np.flatnonzero(~bad[lm.size:])])
        sub, others = sub[np.ix_(keep, keep)], others[~bad[lm.size:]]
    similarity = model.input_kind == "similarity"
    rows = sub[lm.size:, :lm.size]
    if similarity:
        rows = np.hstack([rows, np.diagonal(sub)[lm.size:, None]])
        sub = dissimilarities_from_similarities(sub)
    out = calibrate(model, rows, sub, coverage=coverage, random_state=random_state, truth_sets=truth_sets,
                    max_objects=max_objects)
    if out.calibrating is None or out.predicting is None or out.calibration is None:
        return out
    out.calibration.info.update(sampled=bool(N - lm.size > others.size), fit_objects=int(N - lm.size))
    return Calibrated(out.calibration, out.reason, others[out.calibrating], others[out.predicting])
