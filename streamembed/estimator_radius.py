"""``LandmarkMDS``'s error radius: calibrating it on fit objects and reading it beside ``transform`` (docs/math.md §9).

A mixin of the estimator (``streamembed.estimator``): it reads the fitted
``model_`` and the ``coverage`` and ``random_state`` parameters, and replaces
``model_`` by the same map with a calibration (``core.trust.calibrate``). The
same non-landmark fit objects give the drift detectors their fit baseline
(``core.monitor.fit_baseline``, docs/math.md §7.8): what a daemon arms them from.
"""

from __future__ import annotations

import logging
from typing import Any, Self

import numpy as np

from .core.errors import NotFittedError
from .core.inputs import validation
from .core.model import LandmarkModel
from .core.monitor.fit_baseline import fit_baseline_on_matrix
from .core.trust.calibrate import MAX_OBJECTS, Calibrated, calibrate_on_matrix
from .core.trust.conformal import check_coverage
from .core.fit.features import feature_matrix
from .estimator_inputs import FitInputs, input_rows

__all__ = ["RadiusMixin", "stated_coverage", "restated"]

log = logging.getLogger("streamembed")


class RadiusMixin:
    """``calibrate_radius`` and ``radius`` for ``LandmarkMDS`` (see the module doc)."""

    coverage: float
    random_state: int
    model_: LandmarkModel

    def _fitted_inputs(self) -> FitInputs:  # LandmarkMDS's own (what its fit was given)
        raise NotImplementedError

    def _fitted(self) -> LandmarkModel:
        model: LandmarkModel | None = getattr(self, "model_", None)
        if model is None:
            raise NotFittedError("this LandmarkMDS is not fitted yet: call fit(D) or load a saved model")
        return model

    def _calibrate_fit(self, M: np.ndarray, idx: np.ndarray | None) -> Self:
        """The radius of a fit that kept ``n_landmarks`` of the objects of M (N, N); none when all are landmarks."""
        if idx is None:
            log.info("no radius: every fit object is a landmark (fit more objects than n_landmarks to calibrate it, "
                     "docs/math.md 9)")
            return self
        self.model_ = self._with_radius(calibrate_on_matrix(self.model_, M, idx, coverage=self.coverage,
                                                            random_state=int(self.random_state)))
        return self._with_baseline(M, idx)

    def _with_baseline(self, M: np.ndarray, idx: np.ndarray) -> Self:
        """The drift detectors' fit baseline on the objects of M (N, N) that are not the landmarks ``idx``."""
        self.model_ = self.model_.with_fit_baseline(
            fit_baseline_on_matrix(self.model_, M, idx, random_state=int(self.random_state)))
        return self

    def _with_radius(self, result: Calibrated) -> LandmarkModel:
        if result.calibration is None:
            log.warning("%s", result.reason)
        return self.model_.with_radius_calibration(result.calibration)

    def calibrate_radius(self, X: object, landmark_rows: object, *, max_objects: int = MAX_OBJECTS) -> Self:
        """Calibrate the radius on fit objects: X (N, N) dissimilarities among them (similarities for
        input="similarity"; feature rows (N, p) for a feature model), ``landmark_rows`` (n,) the rows of X
        that are the model's landmarks, in model order; every other row calibrates (docs/math.md §9), at
        most ``max_objects`` of them (a seeded sample).
        Replaces the model's calibration (none, with a WARNING saying why, when it cannot be made), and its
        drift detectors' fit baseline (docs/math.md §7.8)."""
        model = self._fitted()
        X64 = validation.as_float_array(X, "X", 2).astype(np.float64)  # rows with a bad entry are left out
        feature_rows = model.features is not None and not model.has_objects
        if feature_rows and X64.shape[1] == model.features.shape[1]:  # type: ignore[union-attr]  # (N, p)
            X64 = feature_matrix(X64, str(model.metric), model.input_kind)
        rows = np.asarray(landmark_rows, dtype=np.int64)
        self.model_ = self._with_radius(calibrate_on_matrix(model, X64, rows, coverage=self.coverage,
                                                            random_state=int(self.random_state),
                                                            max_objects=int(max_objects)))
        return self._with_baseline(X64, rows)

    def radius(self, X: object, *, self_similarity: object = None) -> np.ndarray:
        """(m,) map units: how far each object's full-MDS position may be from its ``transform`` placement,
        with probability ``coverage`` (docs/math.md §9); X as for ``transform``. NaN when the model has no
        calibration (fitted without non-landmark objects, or loaded from a file saved before it), for the
        methods it does not cover (stress, l1) and for the rows of a block; 0 at a landmark."""
        est: Any = self  # a LandmarkMDS: its metric and embed
        A, _ = input_rows(self._fitted(), X, est.metric, self._fitted_inputs())
        return np.asarray(est.embed(A, self_similarity=self_similarity).radius)



def stated_coverage(model: LandmarkModel) -> dict[str, float]:
    """{"coverage": c} of a model's calibration (the estimator parameter it implies), or {} without one."""
    cal = model.radius_calibration
    return {} if cal is None else {"coverage": cal.coverage}


def restated(model: LandmarkModel, coverage: float) -> LandmarkModel:
    """``model`` with its calibration stating ``coverage`` (checked; the ratios are kept), or as it is without one."""
    cal = model.radius_calibration
    if cal is None or cal.coverage == check_coverage(coverage):
        return model
    return model.with_radius_calibration(cal.with_coverage(coverage))
