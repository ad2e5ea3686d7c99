"""The fitted attributes of ``LandmarkMDS``: read from its ``model_`` (scikit-learn's trailing ``_``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .core.fit.skeleton import Skeleton
from .core.model import LandmarkModel
from .estimator_inputs import PRECOMPUTED, FitInputs, n_features_in
from .named_columns import default_ids


def _fitted(name: str, doc: str) -> property:
    def get(self: FittedAttributes) -> Any:
        return getattr(self._model(), name)

    return property(get, doc=doc)


class FittedAttributes:
    """The fitted attributes of ``LandmarkMDS`` (all read from its ``model_``; scikit-learn's trailing ``_``)."""

    def _model(self) -> LandmarkModel:
        """The fitted model (NotFittedError before fit)."""
        raise NotImplementedError

    def _fitted_inputs(self) -> FitInputs:
        """What fit saw of its X."""
        raise NotImplementedError

    def _metric(self) -> str:
        """The estimator's ``metric`` parameter now."""
        raise NotImplementedError

    embedding_ = _fitted("embedding", "(n, d) landmark configuration in the output frame")
    @property
    def n_features_in_(self) -> int:
        """Columns of X seen by fit: the n landmarks, all N objects when ``n_landmarks`` chose among them, or p
        features (``metric`` other than "precomputed")."""
        return n_features_in(self._model(), self._metric(), self._fitted_inputs())

    @property
    def feature_names_in_(self) -> np.ndarray:
        """(k,) object array: the column names ``transform`` checks (else there is no such attribute).

        A feature-mode model fitted on a DataFrame: its feature names. Any other
        model fitted with landmark ids: the ids; DataFrames handed to
        ``transform``/``embed`` with string column names must name exactly these
        ids, in any order (it is put in model order).
        """
        model = self._model()
        names = self._fitted_inputs().feature_names
        if names is not None:
            return names.copy()
        if model.features is not None and self._metric() != PRECOMPUTED:
            raise AttributeError("feature_names_in_: this LandmarkMDS was fitted on features without column names")
        ids = model.landmark_ids
        if default_ids(ids):
            raise AttributeError("feature_names_in_: this LandmarkMDS was fitted without landmark ids")
        return np.asarray([str(x) for x in ids], dtype=object)

    eigenvalues_ = _fitted("eigenvalues", "(d,) kept eigenvalues")
    spectrum_ = _fitted("spectrum", "the landmark spectrum (core.fit.cmds.LandmarkSpectrum)")
    negative_share_ = _fitted("negative_share", "Σ|λ_neg| / Σ|λ| of the landmark kernel")
    eigengap_ = _fitted("eigengap", "(λ_d − λ_{d+1}) / λ_d at the cut-off, or None (docs/math.md §4.6)")
    map_unique_ = _fitted("map_unique", "False when the eigengap is at most core.model.EIGENGAP_RTOL (None: unknown)")
    n_landmarks_ = _fitted("n_landmarks", "n")
    landmark_ids_ = _fitted("landmark_ids", "(n,) landmark ids in model order")
    model_version_ = _fitted("version", "model version (refits count up)")
    lineage_ = _fitted("lineage", "the map's identity (refits inherit it)")
    input_width_ = _fitted("input_width", "columns of an input row")
    dissimilarities_ = _fitted("dissimilarities", "(n, n) raw landmark dissimilarities or None")
    landmark_features_ = _fitted("features", "(n, p) landmark features or None")
    metric_ = _fitted("metric", "feature metric or kernel, or None")
    alignment_rotation_ = _fitted("rotation", "(d, d) alignment rotation")
    alignment_shift_ = _fitted("shift", "(d,) alignment shift")
    landmark_map_ = _fitted("landmark_map", "(n, d) refined natural-frame map or None")
    map_info_ = _fitted("map_info", "convergence of the SMACOF / Sammon refinement, or None")

    @property
    def skeleton_(self) -> Skeleton | None:
        """The LSDR skeleton (``core.fit.skeleton.Skeleton``) of a ``landmark_selection="skeleton"`` fit, else None."""
        fitted = self.__dict__.get("_skeleton")
        return fitted[1] if fitted is not None and fitted[0] is self._model() else None

    def _map(self, key: str) -> Any:
        info = self._model().map_info
        return None if info is None else info.get(key)

    map_criterion_ = property(lambda self: self._map("criterion"), doc="refined map: its stress / Sammon criterion")
    map_iterations_ = property(lambda self: self._map("iterations"), doc="refined map: majorisation sweeps")
    map_converged_ = property(lambda self: self._map("converged"),
                              doc="refined map: False when the sweep budget ended before the tolerance (None: CMDS)")
    map_tolerance_ = property(lambda self: self._map("tolerance"), doc="refined map: relative criterion tolerance")

    @property
    def landmark_self_similarity_(self) -> np.ndarray | None:
        sim = self._model().pipeline.similarity
        return None if sim is None else sim.landmark_self

    @property
    def geodesic_distances_(self) -> np.ndarray | None:
        geo = self._model().pipeline.geodesic
        return None if geo is None else geo.geodesics

    @property
    def additive_constant_(self) -> float:
        c = self._model().pipeline.constant
        return 0.0 if c is None else float(c.constant)
