"""``LandmarkMDS``: the scikit-learn-style estimator around ``core.model.LandmarkModel``.

scikit-learn's contract without depending on it: ``__init__`` stores the
parameters untouched, ``fit(X, y=None)`` validates them and sets ``model_``
(the fitted, immutable ``LandmarkModel``) and returns ``self``; every other
fitted attribute ends in ``_`` and reads from ``model_``; methods used before
``fit`` raise ``NotFittedError``. ``get_params(deep=True)``, ``set_params``,
``fit_transform`` and ``score`` make it work with ``clone``, ``Pipeline`` and
``GridSearchCV``; ``set_output`` and ``get_feature_names_out`` come from
``streamembed.set_output``. With ``metric="precomputed"`` (the default)
``__sklearn_tags__`` declares pairwise input (X is a dissimilarity matrix:
rows are objects, columns the landmarks), so model selection slices both
axes (``streamembed.sklearn``); any other ``metric`` makes X feature vectors.

Landmark ids: the ids given, a DataFrame's column names, or else the row
numbers of the fit data, "0", "1", ... (as ``streamembed fit``); ids equal to
the row numbers, or to "L0", "L1", ... (the default of models saved before
0.x), mean "fitted without ids" (``named_columns.default_ids``).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Literal
from collections.abc import Iterable

import numpy as np

from .core.inputs import hints as input_hints
from .core.inputs import validation
from .core.inputs.metrics import DEFAULT_METRIC
from .core.monitor.bounds import WindowBounds
from .core.errors import InputError, NotFittedError
from .core.fit.features import feature_matrix, fit_warnings, landmark_objects
from .core.fit.likelihood import ppca_loglik
from .core.fit.skeleton import Skeleton
from .core.model import LandmarkModel, Method, fit_model
from .core.skeleton_model import fit_skeleton_model
from .core.options import DEFAULTS, METHODS, check_options
from .core.refit.selections import SKELETON_SELECTION
from .core.result import EmbeddingResult
from .core.trust.conformal import DEFAULT_COVERAGE, check_coverage
from .estimator_inputs import (NO_FIT_INPUTS, PRECOMPUTED, FitInputs, in_landmark_order, input_rows, kept_landmarks,
                               named_ids, projections)
from .estimator_radius import RadiusMixin, restated, stated_coverage
from .fitted_attributes import FittedAttributes
from .named_columns import column_names
from .set_output import SetOutputMixin

__all__ = ["LandmarkMDS", "METHODS"]

log = logging.getLogger("streamembed")

#: Landmark ids (n,), in the order of the fitted rows; None: their row numbers.
LandmarkIds = Iterable[Any] | None


class LandmarkMDS(SetOutputMixin, FittedAttributes, RadiusMixin):
    """Classical MDS of landmarks plus out-of-sample embedding of new objects.

    Args:
        n_components: d, the map's dimension.
        method: "projection" (Gower / Bengio / landmark MDS / Nyström, docs/math.md §3), "restricted" (Trosset–Priebe
            restricted reconstruction), "stress" (raw stress Σ(‖y - x_i‖ - δ_i)²), "l1" (Σ|δ_i² - ‖y - x_i‖²|) or
            "kernel" (Nadaraya–Watson average of the landmarks' coordinates, §8.6); docs/methods.md.
        n_residual_components: r, eigenpairs used for the exact k0 (docs/math.md §4).
            None: every positive eigenvalue with the full eigensolver, else a
            documented truncation (``cmds.default_partial_rank``), which makes
            k0 an upper bound.
        eigensolver: "auto" (full LAPACK up to 1500 landmarks, partial above), "full" or "partial".
        n_threads: threads for the projection hot path (default: up to 2).
        random_state: seed for the block solver's perturbed starts.
        input: "dissimilarity" (default) or "similarity": ``fit`` takes an (n, n)
            symmetric similarity (kernel) matrix and ``embed`` similarity rows
            (m, n) with ``self_similarity`` (m,) or as (m, n + 1) rows whose last
            column is k(z, z) (``core.inputs.transforms``).
        geodesic_neighbors: None, or k: landmark Isomap on geodesic distances
            through the landmarks' k-nearest-neighbour graph (``core.inputs.geodesic``).
        correction: "none" (negative eigenvalues are dropped) or "cailliez"
            (the additive constant that makes the landmark kernel PSD, ``core.inputs.cailliez``).
        landmark_map: "cmds" (classical MDS), "smacof" / "sammon" (the CMDS
            configuration refined by metric MDS, ``core.fit.metric_map``) or
            "nonmetric" (ordinal MDS: Kruskal's stress-1 with monotone regression,
            ``core.fit.ordinal_map``); a refined map needs method "stress" or "l1".
        n_landmarks: None (every object ``fit`` sees is a landmark), or n: ``fit``
            takes all N objects, (N, N), and keeps n of them as landmarks, chosen by
            ``landmark_selection``; ``transform`` then takes rows of dissimilarities to
            all N (their landmark columns are used) or to the n landmarks.
        landmark_selection: how ``n_landmarks`` are chosen (``core.refit.landmarks.select_landmarks``;
            default "max-variance", measured in docs/landmarks.md), seeded by ``random_state``; "skeleton":
            LSDR's skeleton of Euclidean features and the MDS of its geodesics (docs/math.md §8.4–8.5), with
            ``skeleton_alpha`` (its tests' level) and ``skeleton_neighbors`` (k).
        metric: "precomputed" (default: X holds dissimilarities, or similarities
            for input="similarity"), or the scipy metric (for input="similarity":
            the kernel of ``core.inputs.kernel.FEATURE_KERNELS``) of feature
            vectors: then ``fit(X)`` is ``fit_features(X, metric)`` and
            ``transform``/``score`` take feature rows (m, p).
        coverage: c ∈ (0, 1), the stated coverage of ``radius`` (docs/math.md §9; ``calibrate_radius``).
        kernel_bandwidth: σ > 0 of method "kernel", dissimilarity units; None: Roy's rule at fit (docs/math.md §8.6).

    Fitted attributes (read from ``model_``):
        model_ (LandmarkModel), embedding_ (n, d), eigenvalues_ (d,), spectrum_,
        negative_share_, n_landmarks_, landmark_ids_ (n,) str, feature_names_in_
        (the landmark ids, when fitted with ids; a feature model's column names),
        model_version_, lineage_, input_width_, landmark_indices_ (rows of the fit
        data kept as landmarks, or None), skeleton_, dissimilarities_ (n, n) or None,
        landmark_features_ (n, p) or None, metric_, alignment_rotation_ (d, d)
        and alignment_shift_ (d,) (outputs are y·R + shift), and the input
        pipeline's state: landmark_self_similarity_, geodesic_distances_,
        additive_constant_, landmark_map_.
    """

    def __init__(
        self,
        n_components: int = DEFAULTS["n_components"],
        method: Method = DEFAULTS["method"],
        n_residual_components: int | None = DEFAULTS["n_residual_components"],
        eigensolver: str = DEFAULTS["eigensolver"],
        n_threads: int | None = DEFAULTS["n_threads"],
        random_state: int = DEFAULTS["random_state"],
        input: str = DEFAULTS["input"],
        geodesic_neighbors: int | None = DEFAULTS["geodesic_neighbors"],
        correction: str = DEFAULTS["correction"],
        landmark_map: str = DEFAULTS["landmark_map"],
        n_landmarks: int | None = DEFAULTS["n_landmarks"],
        landmark_selection: str = DEFAULTS["landmark_selection"],
        metric: str = PRECOMPUTED,
        coverage: float = DEFAULT_COVERAGE,
        skeleton_alpha: float = DEFAULTS["skeleton_alpha"],
        skeleton_neighbors: int = DEFAULTS["skeleton_neighbors"],
        kernel_bandwidth: float | None = DEFAULTS["kernel_bandwidth"],
    ):
        self.n_components = n_components
        self.method = method
        self.n_residual_components = n_residual_components
        self.eigensolver = eigensolver
        self.n_threads = n_threads
        self.random_state = random_state
        self.input = input
        self.geodesic_neighbors = geodesic_neighbors
        self.correction = correction
        self.landmark_map = landmark_map
        self.n_landmarks = n_landmarks
        self.landmark_selection = landmark_selection
        self.metric = metric
        self.coverage = coverage
        self.skeleton_alpha = skeleton_alpha
        self.skeleton_neighbors = skeleton_neighbors
        self.kernel_bandwidth = kernel_bandwidth

    # ------------------------------------------------------------------ fitting
    def fit(self, X: object, y: object = None, *, landmark_ids: LandmarkIds = None) -> LandmarkMDS:
        """Fit the landmark map from X (n, n) dissimilarities (not squared); ``y`` is ignored.

        With ``input="similarity"``, X is an (n, n) symmetric similarity matrix;
        with a ``metric`` other than "precomputed", X (n, p) holds feature vectors
        (``fit_features``). ``landmark_ids`` (n,) names the landmarks (default: the
        column names of a DataFrame X, else the row numbers "0", "1", ...); a model
        fitted with ids has ``feature_names_in_`` and checks the column names of
        the DataFrames it embeds (``streamembed.named_columns``). With
        ``n_landmarks`` set, X holds all N objects and ``landmark_ids`` (N,) names
        them; the chosen ones are kept. Matrices that look like similarities are
        refused with that hint; ones that look like squared distances fit with a
        WARNING (``core.inputs.hints``).
        """
        self._check_params()
        if self.metric != PRECOMPUTED:
            return self.fit_features(X, metric=self.metric, landmark_ids=landmark_ids)
        if self.landmark_selection == SKELETON_SELECTION:
            raise InputError(_SKELETON_NEEDS_FEATURES)
        names = column_names(X)
        if names is not None and landmark_ids is not None and [str(x) for x in landmark_ids] != list(names):
            raise InputError("landmark_ids and the column names of X name different landmarks")
        if landmark_ids is None and names is not None:
            landmark_ids = names
        M = validation.check_array(X, "D")
        if self.input == "dissimilarity" and input_hints.looks_like_similarity(M):
            i = int(np.argmax(np.abs(np.diagonal(M))))
            raise InputError(f"D must have a zero diagonal: D[{i}, {i}] = {M[i, i]}; each diagonal entry is its "
                             f"row's largest, as in a similarity matrix: fit it with input='similarity'")
        n_objects = M.shape[0]
        idx, M_all = self._kept_landmarks(M=M), M
        if idx is not None:
            ids = [str(i) for i in idx] if landmark_ids is None else [str(x) for x in named_ids(landmark_ids, M)[idx]]
            M, landmark_ids = M[np.ix_(idx, idx)], ids
        self.model_ = fit_model(M, **self._fit_kwargs(), landmark_ids=landmark_ids)
        self.landmark_indices_ = idx
        self._fit_inputs = FitInputs(landmark_indices=idx, n_fit_objects=n_objects if idx is not None else None)
        if self.input == "dissimilarity" and self.landmark_map != "nonmetric":  # an ordinal map needs the order only
            evidence = input_hints.squared_evidence(M)
            if evidence.likely:
                log.warning("%s", evidence.message("D"))
        self._warn_fit()
        return self._calibrate_fit(M_all, idx)

    def _warn_fit(self) -> None:
        """WARNINGs about the fitted map (``core.fit.features.fit_warnings``): a non-unique map (eigengap), an
        unconverged refinement; an InputError when the map cannot take ``method`` (kernel without a bandwidth)."""
        self.model_.check_method(self.method)
        for warning in fit_warnings(self.model_):
            log.warning("%s", warning)

    def _kept_landmarks(self, *, M: np.ndarray | None = None, F: np.ndarray | None = None,
                        metric: str = PRECOMPUTED) -> np.ndarray | None:
        return kept_landmarks(self.n_landmarks, selection=self.landmark_selection, input=self.input,
                              random_state=self.random_state, n_components=self.n_components, M=M, F=F,
                              metric=metric)

    def fit_features(self, X: object, metric: str | None = None, landmark_ids: LandmarkIds = None) -> LandmarkMDS:
        """Fit from landmark feature vectors X (n, p); distances by ``metric`` (``core.inputs.metrics``).

        ``metric`` defaults to the estimator's (or ``core.inputs.metrics.DEFAULT_METRIC`` when that is
        "precomputed"): a registered name (every scipy ``cdist`` metric) or ``"package.module:function"``.
        With ``input="similarity"``, it names a kernel of ``core.inputs.kernel.FEATURE_KERNELS`` ("linear",
        "cosine", "rbf") instead.
        ``transform`` then takes feature rows (m, p) as well as dissimilarity rows
        (m, n), told apart by their width (p ≠ n; refused as ambiguous when p = n
        unless ``metric`` is set on the estimator). A DataFrame's column names
        become ``feature_names_in_``.
        """
        self._check_params()
        if metric is None:
            metric = DEFAULT_METRIC if self.metric == "precomputed" else self.metric
        names = column_names(X)
        X64 = landmark_objects(X, metric, self.input)  # feature vectors (N, p), or objects (N,)
        if self.landmark_selection == SKELETON_SELECTION:
            self._skeleton = _fit_skeleton(self, X64, metric, landmark_ids, names)  # (model_, its Skeleton)
            return self
        M = feature_matrix(X64, metric, self.input)
        idx, M_all = self._kept_landmarks(F=X64, metric=metric if self.input != "similarity" else DEFAULT_METRIC), M
        if idx is not None:
            ids = [str(i) for i in idx] if landmark_ids is None else [str(x) for x in named_ids(landmark_ids, M)[idx]]
            M, X64, landmark_ids = M[np.ix_(idx, idx)], X64[idx], ids
        self.model_ = fit_model(M, **self._fit_kwargs(), landmark_ids=landmark_ids, features=X64, metric=metric)
        self.landmark_indices_ = idx
        # feature-mode rows hold dissimilarities to the landmarks only: no rows of all N objects
        self._fit_inputs = FitInputs(feature_names=names, landmark_indices=idx)
        self._warn_fit()
        return self._calibrate_fit(M_all, idx)

    def fit_transform(self, X: object, y: object = None, **fit_params: Any) -> Any:
        """``fit(X)`` then ``transform(X)``: the landmarks' own placements (n, d)."""
        return self.fit(X, y, **fit_params).transform(X)

    def _fit_kwargs(self) -> dict[str, Any]:
        return _fit_kwargs(self)

    def _check_params(self) -> None:
        _check_params(self)

    def _model(self) -> LandmarkModel:
        model: LandmarkModel | None = getattr(self, "model_", None)
        if model is None:
            raise NotFittedError("this LandmarkMDS is not fitted yet: call fit(D) or load a saved model")
        return model

    def _fitted_inputs(self) -> FitInputs:
        inputs: FitInputs = getattr(self, "_fit_inputs", NO_FIT_INPUTS)  # from_model/load: none
        return inputs

    def _metric(self) -> str:
        return self.metric

    def __sklearn_is_fitted__(self) -> bool:
        return getattr(self, "model_", None) is not None

    # ------------------------------------------------------------------ embedding
    def transform(self, X: object, *, self_similarity: object = None) -> Any:
        """Embed m objects from X (m, n) dissimilarities to the landmarks -> (m, d), in X's float dtype.

        A DataFrame whose columns are the landmark ids may give them in any
        order (see ``feature_names_in_``); a feature-mode model also takes
        feature rows (m, p). ``self_similarity`` (m,): k(z, z) for a similarity
        model's (m, n) rows. The output follows ``set_output`` (a DataFrame keeps X's index).
        """
        A, dtype = input_rows(self._model(), X, self.metric, self._fitted_inputs())
        Y = self.embed(A, self_similarity=self_similarity).y
        return self._wrap_output(Y.astype(dtype, copy=False), X)

    def _in_order(self, A: object) -> object:
        """A DataFrame named by landmark id in model order (checked); anything else as it is."""
        return in_landmark_order(self._model(), A)

    def transform_block(self, A: object, C: object) -> np.ndarray:
        """Multi-point RR of a block: A (m, n), C (m, m) mutual dissimilarities -> (m, d).

        For a similarity model C holds similarities and its diagonal is k(z, z): block methods need no
        ``self_similarity``.
        """
        return self.embed(A, C).y

    def transform_blocks(self, A: object, C_list: Any) -> np.ndarray:
        """Multi-point RR of many blocks at once: A (m, n) with blocks consecutive, C_list their k_i×k_i -> (m, d)."""
        return self.embed_blocks(A, C_list).y

    def embed_blocks(self, A: object, C_list: Any, *, k0_rows: None | Literal["all"] | int = None,
                     errors: Literal["raise", "mask"] = "raise") -> EmbeddingResult:
        """``transform_blocks`` with residuals, flags and per-block objectives (``result.blocks``)."""
        return self._model().place_blocks(self._in_order(A), C_list, k0_rows=k0_rows, errors=errors)

    def embed(self, A: object, C: object = None, *, method: Method | None = None,
              k0_rows: None | Literal["all"] | int = None, errors: Literal["raise", "mask"] = "raise",
              self_similarity: object = None) -> EmbeddingResult:
        """Embed a batch and report how much to trust each placement (``LandmarkModel.place``).

        A: (m, n) dissimilarities (not squared) to the landmarks, float32 or
        float64 (the hot path runs in that precision); C: (m, m) mutual
        dissimilarities make the batch one block (multi-point RR); ``method``
        overrides the estimator's; ``k0_rows``: exact k0 for None, "all" or s
        evenly spaced rows; ``errors``: "raise" or "mask" (bad rows get
        valid=False and a Problem); ``self_similarity``: (m,) k(z, z) for a
        similarity model with (m, n) rows.
        """
        return self._model().place(self._in_order(A), C, method=self.method if method is None else method,
                                   k0_rows=k0_rows, errors=errors, self_similarity=self_similarity)

    def score(self, X: object, y: object = None, *, self_similarity: object = None) -> float:
        """Mean held-out log-likelihood of the rows of X under the map's probabilistic PCA (docs/math.md §4.7).

        scikit-learn's ``PCA.score`` in the landmark kernel's feature space
        (``core.fit.likelihood``): each kept axis must earn its cost, so the score
        peaks at a d where the discarded axes look like noise, and
        ``GridSearchCV`` over ``n_components`` can choose d (higher is better;
        nats per object). X as for ``transform``; a similarity model needs
        k(z, z) (``self_similarity`` or (m, n + 1) rows). See
        ``explained_energy`` for the share of energy the map explains.
        """
        model = self._model()
        y_r, e_d = projections(model, X, self_similarity, self.metric, self._fitted_inputs())
        return float(ppca_loglik(y_r, e_d, model.spectrum.eigenvalues, model.n_landmarks).mean())

    def explained_energy(self, X: object, *, self_similarity: object = None) -> float:
        """Share of the rows' energy the map's d axes explain: 1 − Σ unexplained / Σ β (docs/math.md §4).

        1 means every object lies in the map's span; it rises with d (use ``score`` to choose d).
        """
        y_r, e_d = projections(self._model(), X, self_similarity, self.metric, self._fitted_inputs())
        beta = e_d + np.einsum("ij,ij->i", y_r, y_r)
        ok = beta > 0
        return float(1.0 - e_d[ok].sum() / beta[ok].sum()) if ok.any() else float("nan")

    def residuals(self, A: object, C: object = None, k0_rows: None | Literal["all"] | int = "all",
                  n_window: int | None = None, self_similarity: object = None) -> tuple[EmbeddingResult, WindowBounds]:
        """Per-object residuals (β, unexplained, exact k0) and the window bounds (docs/math.md §4)."""
        return self._model().residuals(self._in_order(A), C, k0_rows, n_window, self_similarity)

    def arc(self, A: object, s: float, *, self_similarity: object = None) -> np.ndarray:
        """The point at fraction s ∈ [0, 1] of the arc from projection (0) to RR (1), (m, d)."""
        return self._model().arc(self._in_order(A), s, self_similarity=self_similarity)

    def set_alignment(self, rotation: np.ndarray, shift: np.ndarray) -> LandmarkMDS:
        """Map every output into another frame: y ↦ y·R + shift (docs/math.md §5)."""
        self.model_ = self._model().aligned(rotation, shift)
        return self

    def dissimilarities_to_landmarks(self, F: object) -> np.ndarray:
        """Feature mode: the input rows (m, n) [or (m, n + 1)] of feature rows F (m, p)."""
        return self._model().dissimilarities_to_landmarks(F)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the fitted model to a portable ``.npz`` (no pickle; see ``model_io``)."""
        from .model_io import save_model

        save_model(self._model(), path, params=self.get_params())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LandmarkMDS:
        """Read a model written by ``save``; raises ``ModelFileError`` on a bad file."""
        from .model_io import read_model_file

        model, params = read_model_file(path)
        return cls.from_model(model, **params)

    @classmethod
    def from_model(cls, model: LandmarkModel, **params: Any) -> LandmarkMDS:
        """An estimator holding an existing fitted ``model`` (parameters taken from it unless given)."""
        fp = model.fit_params
        defaults = {"n_components": int(model.n_components),
                    **{k: fp.get(k, DEFAULTS[k]) for k in ("input", "geodesic_neighbors", "correction", "landmark_map",
                                                           "n_residual_components", "eigensolver")},
                    "random_state": model.random_state, "n_threads": model.n_threads,
                    "kernel_bandwidth": model.kernel_bandwidth}
        est = cls(**{**defaults, **stated_coverage(model), **params})
        est.model_ = restated(model, est.coverage)
        return est

    # ------------------------------------------------------------------ scikit-learn protocol
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _PARAMS}

    def set_params(self, **params: Any) -> LandmarkMDS:
        for name, value in params.items():
            if name not in _PARAMS:
                raise ValueError(f"invalid parameter {name!r} for LandmarkMDS; valid parameters: {', '.join(_PARAMS)}")
            setattr(self, name, value)
        return self

    def __sklearn_tags__(self) -> Any:
        from .sklearn import estimator_tags

        pairwise = self.metric == "precomputed"
        return estimator_tags(pairwise=pairwise, positive_only=pairwise and self.input == "dissimilarity")

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"LandmarkMDS({params})"


_PARAMS = ("n_components", "method", "n_residual_components", "eigensolver", "n_threads", "random_state", "input",
           "geodesic_neighbors", "correction", "landmark_map", "n_landmarks", "landmark_selection", "metric",
           "coverage", "skeleton_alpha", "skeleton_neighbors", "kernel_bandwidth")
#: Parameters that are not options of ``core.options`` (checked here).
_OWN_PARAMS = ("metric", "coverage")


def _fit_kwargs(est: LandmarkMDS) -> dict[str, Any]:
    """``core.model.fit_model``'s options from the estimator's parameters."""
    return {"n_components": int(est.n_components), "input": est.input,
            "geodesic_neighbors": None if est.geodesic_neighbors is None else int(est.geodesic_neighbors),
            "correction": est.correction, "landmark_map": est.landmark_map,
            "n_residual_components": est.n_residual_components, "eigensolver": est.eigensolver,
            "random_state": est.random_state, "n_threads": est.n_threads, "kernel_bandwidth": est.kernel_bandwidth}


def _check_params(est: LandmarkMDS) -> None:
    """Refuse invalid estimator parameters with the allowed values (scikit-learn checks them in ``fit``).

    Every parameter but ``metric`` is an option of ``core.options``: its constraint and the table's rules
    (a refined landmark map needs a criterion method) are checked there, all at once.
    """
    check_options(**{name: getattr(est, name) for name in _PARAMS if name not in _OWN_PARAMS})
    if not isinstance(est.metric, str) or not est.metric:
        raise InputError(f"metric must be 'precomputed' or the name of a metric (kernel), got {est.metric!r}")
    check_coverage(est.coverage)



_SKELETON_NEEDS_FEATURES = ("landmark_selection='skeleton' finds the skeleton of feature vectors: set "
                            "metric='euclidean' (X (N, p) features) or call fit_features(X)")


def _fit_skeleton(est: LandmarkMDS, X64: np.ndarray, metric: str, landmark_ids: LandmarkIds,
                  names: np.ndarray | None) -> tuple[LandmarkModel, Skeleton]:
    """``fit_features`` with landmark_selection="skeleton": the LSDR map
    (``core.skeleton_model.fit_skeleton_model``)."""
    if metric != "euclidean":
        raise InputError(f"landmark_selection='skeleton' needs the Euclidean metric (its Delaunay tessellation "
                         f"and geodesics are Euclidean), got metric={metric!r}")
    est.model_, sk = fit_skeleton_model(
        X64, skeleton_alpha=float(est.skeleton_alpha), skeleton_neighbors=int(est.skeleton_neighbors),
        landmark_ids=landmark_ids, **est._fit_kwargs())
    est.landmark_indices_ = sk.indices
    # feature-mode rows hold dissimilarities to the landmarks only: no rows of all N objects
    est._fit_inputs = FitInputs(feature_names=names, landmark_indices=sk.indices)
    est._warn_fit()
    return est.model_, sk
