"""A landmark map from the landmarks' feature vectors: their matrix by a metric or a kernel, then ``fit_model``.

``feature_matrix`` is what a feature-mode fit decomposes: dissimilarities
between the landmarks by a metric (``core.inputs.metrics``), or similarities
by a kernel (``core.inputs.kernel.FEATURE_KERNELS``) for ``input="similarity"``
(docs/math.md §2). ``fit_feature_model`` fits the model from them and keeps
the features and the metric (or kernel), so that ``dissimilarities_to_landmarks``
turns new feature rows into input rows the same way. The estimator
(``LandmarkMDS.fit_features``) and the daemon's generator-fitted model both
fit through here. ``fit_warnings`` says what a fitted map should warn about.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from ..inputs import kernel as kernel_input
from ..inputs import validation
from ..inputs.metrics import resolve_metric
from ..model import EIGENGAP_RTOL, LandmarkModel, fit_model
from ..options import DEFAULTS

__all__ = ["feature_matrix", "fit_feature_model", "fit_warnings", "landmark_objects"]


def landmark_objects(X: object, metric: str, input: str = DEFAULTS["input"]) -> np.ndarray:
    """What a feature-mode fit keeps of X: (n, p) float64 feature vectors, or, for a metric of objects
    (``Metric.of_objects``), a 1-D object array of its strings or series (``core.inputs.objects``)."""
    if input != "similarity":
        m = resolve_metric(metric)
        if m.of_objects:
            objs = m.objects(X, "X")
            if isinstance(objs, np.ndarray) and objs.dtype == object:
                return objs
    return validation.check_array(X, "X").astype(np.float64)


def feature_matrix(X64: np.ndarray, metric: str, input: str = DEFAULTS["input"]) -> np.ndarray:
    """(n, n) float64 among feature rows X64 (n, p) (or objects, ``landmark_objects``): ``metric``'s
    dissimilarities, or the kernel ``metric``'s similarities for ``input="similarity"`` (InputError naming a kernel
    that is not one)."""
    if input == "similarity":
        if metric not in kernel_input.FEATURE_KERNELS:
            raise InputError(f"with input='similarity' the metric names a kernel, one of "
                             f"{kernel_input.FEATURE_KERNELS}; got {metric!r}")
        return kernel_input.feature_kernel(X64, X64, metric)
    return resolve_metric(metric).pairwise(X64)


def fit_feature_model(X: object, metric: str, *, landmark_ids: Any = None, **options: Any) -> LandmarkModel:
    """The landmark model of the landmarks' feature vectors X (n, p), or of their objects: ``fit_model`` of their
    ``feature_matrix``, keeping X (``landmark_objects``) and ``metric``. ``options`` are ``fit_model``'s (``input``
    among them)."""
    X64 = landmark_objects(X, metric, options.get("input", DEFAULTS["input"]))
    M = feature_matrix(X64, metric, options.get("input", DEFAULTS["input"]))
    return fit_model(M, **options, landmark_ids=landmark_ids, features=X64, metric=metric)


def fit_warnings(model: LandmarkModel) -> list[str]:
    """What a fitted map should warn its user about: a map that is not unique (the eigengap at its cut-off,
    docs/math.md §4.6), a refinement stopped at its budget."""
    out = []
    if model.map_unique is False:
        d = int(model.n_components)
        lam = model.spectrum.eigenvalues
        nxt = float(lam[d]) if lam.shape[0] > d else float(model.spectrum.next_eigenvalue)
        out.append(f"the map is not unique: lambda_{d} = {float(lam[d - 1]):.6g} and lambda_{d + 1} = {nxt:.6g} "
                   f"differ by {model.eigengap:.2g} relative (<= {EIGENGAP_RTOL:g}), so the kept axes, the map and "
                   f"every placement depend on the order of the landmarks, and a refit of unchanged data may rotate "
                   f"the map (docs/math.md 4.6); choose n_components where the spectrum has a gap (`streamembed "
                   f"model info` shows it)")
    info = model.map_info
    if info is not None and not info["converged"]:
        out.append(f"landmark_map={model.fit_params.get('landmark_map')!r}: the refinement stopped at its budget of "
                   f"{info['iterations']} sweeps before the relative criterion change fell to {info['tolerance']:g} "
                   f"(criterion {info['criterion']:.6g}); the map is not converged (map_converged_ is False)")
    return out
