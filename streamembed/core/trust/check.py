"""Coverage of the radius on a sample of objects, against an exact classical MDS of that sample (docs/math.md §9.6).

What a stream needs to watch the radius: for k objects of a window whose
mutual dissimilarities are known (a block with ``cross``, or feature rows
with the model's metric), the classical MDS of the landmarks and those k
objects (``full_mds.FullMap``, aligned on the landmarks exactly as at
calibration) gives each object's full-MDS position; the share of the objects
whose placement lies within its radius of it is the sample's coverage. On
objects like the fit population it scatters around the stated coverage (the
full MDS of a sample is itself a sample: ``benchmarks/radius_calibration.py``
measures the spread); after a population change the radius no longer covers
and it falls. Cost: one eigendecomposition of (n + k)² and one placement of
k rows; no I/O, no state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from ..inputs import validation
from ..options import DEFAULTS
from .full_mds import FullMap

if TYPE_CHECKING:
    from ..model import LandmarkModel

__all__ = ["SampleCoverage", "sample_coverage", "sample_coverage_features"]


@dataclass(frozen=True)
class SampleCoverage:
    """The radius checked on k objects.

    Attributes:
        coverage: share of the objects with a finite radius whose full-MDS position lies within it
            (NaN when none has a radius).
        errors: (k,) distance of each placement from its full-MDS position (map units).
        radius: (k,) each object's radius (NaN where there is none).
        method: the placement method checked.
    """

    coverage: float
    errors: np.ndarray
    radius: np.ndarray
    method: str

    @property
    def n_objects(self) -> int:
        """Objects whose radius was checked (finite radius and error)."""
        return int((np.isfinite(self.radius) & np.isfinite(self.errors)).sum())


def sample_coverage(model: LandmarkModel, rows: object, cross: object, *, method: str = DEFAULTS["method"],
                    landmark_dissimilarities: object = None) -> SampleCoverage:
    """The coverage of ``model``'s radius on k objects with input rows ``rows`` (k, w) and mutual
    dissimilarities ``cross`` (k, k) (similarities for a similarity model), placed one at a time by ``method``.

    ``landmark_dissimilarities`` (n, n): the landmarks' core dissimilarities; default: those the model keeps
    (``LandmarkModel.dissimilarities``, or its features' distances). InputError when there are none.
    """
    A, C = model.core_dissimilarities(rows, cross)
    assert C is not None  # a block's C comes back with it
    D_LL = _landmark_block(model, landmark_dissimilarities)
    n, k = D_LL.shape[0], A.shape[0]
    if k < 1:
        raise InputError("a coverage check needs at least one object")
    D = np.empty((n + k, n + k))
    D[:n, :n], D[:n, n:], D[n:, :n], D[n:, n:] = D_LL, A.T, A, 0.5 * (C + C.T)
    truth = FullMap.fit(D, np.arange(n), model.embedding).positions[n:]
    res = model.place(rows, method=method, errors="mask")
    errors = np.linalg.norm(res.y - truth, axis=1)
    radius = np.asarray(res.radius, dtype=np.float64)
    ok = np.isfinite(radius) & np.isfinite(errors)
    coverage = float(np.mean(errors[ok] <= radius[ok])) if ok.any() else float("nan")
    return SampleCoverage(coverage=coverage, errors=errors, radius=radius, method=method)


def sample_coverage_features(model: LandmarkModel, F: object, *, method: str = DEFAULTS["method"]) -> SampleCoverage:
    """``sample_coverage`` for feature rows F (k, p) of a feature-mode model: rows and mutual dissimilarities
    by the model's metric (a similarity model's kernel)."""
    if model.features is None or model.metric is None:
        raise InputError("feature rows are checked against a feature-mode model only")
    F64 = validation.as_float_array(F, "features", 2).astype(np.float64)
    rows = model.dissimilarities_to_landmarks(F64)
    if model.input_kind == "similarity":
        from ..inputs.kernel import feature_kernel

        cross = feature_kernel(F64, F64, model.metric)
    else:
        import scipy.spatial.distance

        cross = scipy.spatial.distance.cdist(F64, F64, metric=model.metric)
    return sample_coverage(model, rows, cross, method=method)


def _landmark_block(model: LandmarkModel, given: object) -> np.ndarray:
    n = model.n_landmarks
    if given is not None:
        D = np.asarray(given, dtype=np.float64)
    elif model.dissimilarities is not None and model.input_kind == "dissimilarity":
        D = np.asarray(model.dissimilarities, dtype=np.float64)
    elif model.features is not None and model.metric is not None:
        rows = model.dissimilarities_to_landmarks(model.features)
        if model.input_kind == "similarity":
            D = model.core_dissimilarities(rows[:, :n], None, rows[:, n])[0]
        else:
            D = np.asarray(rows, dtype=np.float64)
    else:
        raise InputError("a coverage check needs the landmarks' dissimilarities: this model keeps none "
                         "(pass landmark_dissimilarities)")
    if D.shape != (n, n):
        raise InputError(f"landmark_dissimilarities must be ({n}, {n}), got {D.shape}")
    return 0.5 * (D + D.T)
