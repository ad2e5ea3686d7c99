"""The bandwidth σ of kernel placement on a fitted map (docs/math.md §8.6): at fit, and for a saved model.

A fit computes σ by Roy's §3.3 rule (``core.place.kernel.bandwidth``) from the landmarks' core
dissimilarities, the matrix the spectrum is built on (after similarities → dissimilarities, geodesics and the
additive constant: the units of the rows kernel placement weighs), unless the user gives one; a skeleton map
takes its skeleton's σ (``core.fit.skeleton.Skeleton.bandwidth``, with the boundary distances). A model file
saved before σ was stored gets the rule's σ from what it keeps (:func:`saved_bandwidth`). No I/O.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError
from ..inputs import kernel as kernel_input
from ..inputs.cailliez import add_constant
from ..inputs.metrics import resolve_metric
from ..inputs.transforms import InputPipeline
from ..place.kernel import bandwidth, check_bandwidth

__all__ = ["rule_bandwidth", "fit_bandwidth", "landmark_core_dissimilarities", "saved_bandwidth"]


def rule_bandwidth(D_core: np.ndarray) -> float | None:
    """σ of the §3.3 rule with no boundary (b_s = 0) from the landmarks' (n, n) core dissimilarities, or None when
    the rule gives none (every landmark coincides with another: σ = 0)."""
    try:
        return bandwidth(D_core)
    except InputError:
        return None


def fit_bandwidth(D_core: np.ndarray, kernel_bandwidth: object) -> float | None:
    """The σ a fit stores: the user's ``kernel_bandwidth`` (refused unless a finite number > 0), else the rule's."""
    if kernel_bandwidth is not None:
        return check_bandwidth(kernel_bandwidth, "kernel_bandwidth")
    return rule_bandwidth(D_core)


def landmark_core_dissimilarities(pipeline: InputPipeline, dissimilarities: np.ndarray | None,
                                  features: np.ndarray | None, metric: str | None) -> np.ndarray | None:
    """(n, n) the landmarks' core dissimilarities rebuilt from what a fitted model keeps, or None when it keeps
    nothing they can be rebuilt from (a similarity model without features)."""
    if pipeline.geodesic is not None and pipeline.geodesic.geodesics is not None:
        D = np.asarray(pipeline.geodesic.geodesics, dtype=np.float64)
    elif pipeline.similarity is None and dissimilarities is not None:
        D = np.asarray(dissimilarities, dtype=np.float64)
    elif features is not None and metric is not None:
        F = np.asarray(features, dtype=np.float64)
        if pipeline.similarity is not None:
            D = kernel_input.landmark_dissimilarities(kernel_input.feature_kernel(F, F, metric))
        else:
            D = resolve_metric(metric)(F, F)
            D = 0.5 * (D + D.T)
            np.fill_diagonal(D, 0.0)
    else:
        return None
    c = 0.0 if pipeline.constant is None else float(pipeline.constant.constant)
    return add_constant(D, c) if c > 0 else D


def _stored(name: str, v: object) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
        raise TypeError(f"metadata {name!r} must be a finite number > 0 or null, got {v!r}")
    return float(v)


def saved_bandwidth(sigma: object, given: object, *, stored: bool, skeleton: bool,
                    core: tuple[InputPipeline, np.ndarray | None, np.ndarray | None, str | None]
                    ) -> tuple[float | None, float | None]:
    """(σ, the user's σ or None) of a model file: its stored values (``stored``: the file has them, checked), or
    for a file saved before σ was stored the rule's σ from ``core`` (pipeline, landmark dissimilarities,
    features, metric: :func:`landmark_core_dissimilarities`) — None for a skeleton map (its σ needs the
    skeleton's boundary distances, which no file keeps) or when nothing to compute it from is kept."""
    if stored:
        return _stored("bandwidth", sigma), _stored("kernel_bandwidth", given)
    if skeleton:
        return None, None
    try:
        D = landmark_core_dissimilarities(*core)
    except (ValueError, ImportError):  # e.g. a metric of another installation: the model loads without σ
        return None, None
    return (None if D is None else rule_bandwidth(D)), None
