"""Building a model's ``FitBaseline`` from its non-landmark fit objects (docs/math.md §7.8).

``fit_baseline`` places the objects (projection), keeps their unexplained
energies and their projections on the leading monitored axes in a seeded
random order, measures how much of them the map explains, and, when the
model has a radius and the objects' mutual dissimilarities are given, the
radius's coverage on ``COVERAGE_SAMPLES`` seeded samples of
``COVERAGE_OBJECTS`` of them against an exact classical MDS of each sample
(``core.trust.check.sample_coverage``: what the coverage trigger compares
the stream's samples with). ``fit_baseline_on_matrix`` does it on the fit
matrix itself, as ``core.trust.calibrate.calibrate_on_matrix`` does for the
radius. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from ..options import DEFAULTS
from ..runtime import single_blas_thread
from .baseline import BASELINE_AXES, MAX_AXES_OBJECTS, MAX_BASELINE_OBJECTS, FitBaseline

if TYPE_CHECKING:
    from ..model import LandmarkModel

__all__ = ["COVERAGE_SAMPLES", "COVERAGE_OBJECTS", "COVERAGE_MAX_SIZE", "MIN_OBJECTS", "fit_baseline",
           "fit_baseline_on_matrix", "leading_axes"]

#: Stationary samples whose coverage the baseline keeps, and objects per sample (``drift.coverage_objects``).
COVERAGE_SAMPLES = 40
COVERAGE_OBJECTS = 150
#: No coverage samples when landmarks + sample exceed this (each costs an eigendecomposition of that size).
COVERAGE_MAX_SIZE = 1200
#: Fewer valid non-landmark fit objects than this give no baseline (nothing could be calibrated on them).
MIN_OBJECTS = 30


def leading_axes(model: LandmarkModel, A_core: np.ndarray, q: int) -> np.ndarray:
    """(m, q') float64 projections of core rows A_core (m, n) (float32 or float64) on the map's q' = min(q, r)
    leading monitored eigenpairs, in the model's own eigenbasis (the first d are the map's coordinates before
    alignment): one product with the fused projection kernel of q' axes (docs/math.md §3.1)."""
    q = max(int(model.n_components), min(int(q), model.spectrum.rank))
    if A_core.shape[0] == 0:
        return np.empty((0, q))
    dtype = np.dtype(np.float32) if A_core.dtype == np.float32 else np.dtype(np.float64)
    Z, _ = model.kernel(q, dtype)(np.ascontiguousarray(A_core, dtype=dtype))
    return np.asarray(Z[:, :q], dtype=np.float64)


#: ``block(pick)`` -> the (n + len(pick))² dissimilarities among the landmarks (model order) and objects ``pick``.
Block = Callable[[np.ndarray], np.ndarray]


def fit_baseline(model: LandmarkModel, rows: np.ndarray, block: Block | None = None, *,
                 random_state: int = DEFAULTS["random_state"], coverage_samples: int = COVERAGE_SAMPLES,
                 coverage_objects: int = COVERAGE_OBJECTS) -> FitBaseline | None:
    """The baseline of k non-landmark fit objects with model input rows ``rows`` (k, w) (module doc).

    ``block``: the dissimilarities among the landmarks and a sample of the objects (indices into ``rows``), for
    the coverage samples (None: none). None when fewer than ``MIN_OBJECTS`` objects can be placed, or for a
    refined map (SMACOF, Sammon, non-metric: placed by a criterion, with no projection onto it), whose detectors
    arm from the stream as before.
    """
    with single_blas_thread():
        return _fit_baseline(model, np.asarray(rows), block, random_state, coverage_samples, coverage_objects)


def _fit_baseline(model: LandmarkModel, rows: np.ndarray, block: Block | None, seed: int, samples: int,
                  size: int) -> FitBaseline | None:
    rng = np.random.default_rng(seed)
    k = rows.shape[0]
    if k < MIN_OBJECTS or model.landmark_map is not None:  # a refined map has no projection: armed from the stream
        return None
    order = rng.permutation(k)[:MAX_BASELINE_OBJECTS]
    res = model.place(rows[order], method="projection", errors="mask")
    ok = res.valid & np.isfinite(res.unexplained) & np.isfinite(res.beta)
    order, u, beta = order[ok], res.unexplained[ok], res.beta[ok]
    if order.size < MIN_OBJECTS:
        return None
    A_core = model.core_dissimilarities(rows[order[:MAX_AXES_OBJECTS]])[0]
    axes = leading_axes(model, A_core, BASELINE_AXES).astype(np.float32)
    positive = beta > 0
    explained = 1.0 - float(u[positive].sum() / beta[positive].sum()) if positive.any() else float("nan")
    median_u = float(np.median(u[positive] / beta[positive])) if positive.any() else float("nan")
    mean_sq = beta + 0.5 * model.spectrum.grand_mean  # each row's mean squared dissimilarity (docs/math.md §2)
    coverage, used = _coverage_samples(model, rows, block, order, rng, samples, size)
    info = {"objects": int(order.size), "fit_objects": int(k), "n_components": int(model.n_components),
            "axes": int(axes.shape[1]), "seed": int(seed), "coverage_samples": int(coverage.size),
            "mean_square_low": float(mean_sq.min()), "mean_square_high": float(mean_sq.max()),
            "relative_unexplained_min": float((u[positive] / beta[positive]).min()) if positive.any() else 0.0,
            "stated_coverage": None if model.radius_calibration is None else float(model.radius_calibration.coverage)}
    return FitBaseline(unexplained=u.astype(np.float64), axes=axes, coverage=coverage, coverage_objects=used,
                       explained_share=explained, median_unexplained_share=median_u, info=info)


def _coverage_samples(model: LandmarkModel, rows: np.ndarray, block: Block | None, usable: np.ndarray,
                      rng: np.random.Generator, samples: int, size: int) -> tuple[np.ndarray, int]:
    """(coverages (J,), objects per sample) of seeded samples of the usable objects; empty when not measurable."""
    from ..trust.check import sample_coverage

    n = int(model.n_landmarks)
    kk = min(int(size), usable.size // 2)
    if block is None or model.radius_calibration is None or samples < 1 or kk < 20 or n + kk > COVERAGE_MAX_SIZE:
        return np.empty(0), 0
    out = []
    for _ in range(int(samples)):
        pick = np.sort(rng.choice(usable, kk, replace=False))
        D = np.asarray(block(pick), dtype=np.float64)
        try:
            if not np.isfinite(D).all():
                continue
            sc = sample_coverage(model, rows[pick], D[n:, n:], landmark_dissimilarities=D[:n, :n])
        except (InputError, ValueError, np.linalg.LinAlgError):
            continue
        if np.isfinite(sc.coverage):
            out.append(sc.coverage)
    return np.asarray(out, dtype=np.float64), (kk if out else 0)


def fit_baseline_on_matrix(model: LandmarkModel, M: np.ndarray, landmarks: np.ndarray, *,
                           random_state: int = DEFAULTS["random_state"]) -> FitBaseline | None:
    """``fit_baseline`` on the fit matrix M (N, N) (similarities for a similarity model), ``landmarks`` (n,) the
    rows of M that are the model's landmarks in model order; every other row is a baseline object (rows with a
    non-finite or negative entry are left out). None when there are too few of them."""
    from ..trust.full_mds import dissimilarities_from_similarities

    M = np.asarray(M)
    lm = np.asarray(landmarks, dtype=np.int64)
    N = M.shape[0]
    if M.ndim != 2 or M.shape[1] != N or lm.size != int(model.n_landmarks):
        raise InputError(f"a fit baseline needs the (N, N) fit matrix and the landmarks' {model.n_landmarks} rows, "
                         f"got shapes {M.shape} and {lm.shape}")
    others = np.setdiff1d(np.arange(N), lm)
    if others.size > MAX_BASELINE_OBJECTS:
        others = np.sort(np.random.default_rng(random_state).choice(others, MAX_BASELINE_OBJECTS, replace=False))
    if others.size < MIN_OBJECTS:
        return None
    similarity = model.input_kind == "similarity"
    rows = np.asarray(M[np.ix_(others, lm)], dtype=np.float64)
    good = np.isfinite(rows).all(axis=1) & (similarity or (rows >= 0).all(axis=1))
    if similarity:
        rows = np.hstack([rows, np.asarray(M[others, others], dtype=np.float64)[:, None]])
    others, rows = others[good], rows[good]

    def block(pick: np.ndarray) -> np.ndarray:
        order = np.concatenate([lm, others[pick]])
        sub = np.asarray(M[np.ix_(order, order)], dtype=np.float64)
        return dissimilarities_from_similarities(sub) if similarity else sub

    return fit_baseline(model, rows, block, random_state=random_state)
