"""``LandmarkModel``: the fitted landmark map, immutable, and everything it needs to place new objects.

What a fit produces and a refit replaces: the landmark spectrum (docs/math.md
§1), the input transforms (``core.inputs.transforms``), an optional refined map
(SMACOF / Sammon, ``core.fit.metric_map``), the alignment into the frame of the
model's predecessors (docs/math.md §5), the landmark ids in model order, the
version and the lineage. ``place`` embeds a batch (``core.place.placer``);
``model_io`` saves and loads exactly this object. The scikit-learn-style
``LandmarkMDS`` estimator only holds parameters and builds one of these.

A model never changes after it is built: ``aligned`` and ``with_version``
return new models (they share the arrays), so a model can be handed to
threads and processes without locks of the caller's. What placing needs
(projection kernels, limits) lives in its ``Placer`` (``core.place.placer``),
built once from the model's arrays under the model's own lock; the placer
never calls back into the model, and its kernels keep no per-call state
between threads (``core.place.projection``): threads sharing a model get
bit-identical results to one thread.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

import numpy as np

from .errors import InputError
from .fit.bandwidth import fit_bandwidth
from .fit.cmds import NEGATIVE_SHARE_TOL, LandmarkSpectrum, default_partial_rank, fit_spectrum_eigh
from .fit.metric_map import refine_map
from .fit.ordinal_map import MonotoneTransform, rank_start
from .inputs import kernel as kernel_input
from .inputs import validation
from .inputs.metrics import resolve_metric
from .inputs.transforms import InputPipeline
from .monitor.baseline import FitBaseline
from .monitor.bounds import WindowBounds
from .monitor.calibration import arrival_negative_ratio
from .monitor.plausibility import implausible_flags, row_limits
from .options import CORRECTIONS, CRITERION_METHODS, DEFAULTS, INPUTS, KERNEL_METHODS, METHODS, check_options
from .place.kernel import check_bandwidth
from .place.methods import block_refusal, map_problem
from .place.placer import Placer
from .place.projection import ProjectionKernel
from .result import EmbeddingResult
from .trust.calibration import RadiusCalibration

__all__ = ["LandmarkModel", "fit_model", "relative_eigengap", "EIGENGAP_RTOL", "METHODS",
           "KERNEL_METHODS", "CRITERION_METHODS", "INPUTS", "CORRECTIONS", "Method", "lineage_of"]

# METHODS, KERNEL_METHODS, CRITERION_METHODS, INPUTS and CORRECTIONS are the option table's (core.options).
#: A placement method's name: one of ``METHODS`` (the registry ``core.place.methods.PLACEMENT_METHODS``; checked
#: by ``check_options`` where it is given, not by a Literal that a new method would have to edit).
Method: TypeAlias = str
#: A relative eigengap (λ_d − λ_{d+1})/λ_d at or below this makes the map not unique (docs/math.md §4.6):
#: the kept axes are then decided by round-off or by noise of that relative size, so the map and every
#: placement depend on the order of the landmarks, and a refit of unchanged data may rotate it.
EIGENGAP_RTOL = 1e-6


@dataclass(frozen=True, eq=False)
class LandmarkModel:
    """A fitted landmark map (see the module doc).

    Attributes:
        spectrum: the landmark kernel's positive eigenpairs and centring constants.
        n_components: d, the map's dimension.
        landmark_ids: (n,) str, the landmarks in model order (input rows follow it).
        pipeline: the fitted input transforms.
        fit_params: how it was fitted: input, geodesic_neighbors, correction,
            landmark_map, n_residual_components, eigensolver (refits reuse them).
        landmark_map: (n, d) refined natural-frame map (SMACOF / Sammon / non-metric), or None.
        map_info: convergence of that refinement (iterations, criterion, ...), or None.
        map_transform: a non-metric map's fitted monotone transformation δ ↦ d̂
            (``core.fit.ordinal_map``): arrivals' dissimilarities go through it
            before the stress criterion places them; None for every other map.
        rotation, shift: (d, d) orthogonal R and (d,) translation: outputs are y·R + shift.
        version: model version (1 for a fit; refits count up).
        lineage: identity of the map this model belongs to; refits inherit it.
        dissimilarities: (n, n) raw landmark dissimilarities (refits need them), or None.
        features, metric: the landmarks' objects and the metric between them (``core.inputs.metrics``; or the
            kernel name of a similarity model) for a model fitted from objects, else None: (n, p) feature
            vectors, or a 1-D object array of strings, bytes or series (``core.inputs.objects``,
            ``has_objects``).
        random_state: seed of the block solver's perturbed starts.
        n_threads: threads of the projection hot path and solvers (None: ``runtime.default_threads()``).
        negative_ratio: the ``non_euclidean`` flag's threshold on −k0/β
            (``core.monitor.calibration``; 0 for Euclidean landmarks; None for a model
            saved before it existed: the landmarks' own ratio is used).
        eigengap: relative eigengap at the cut-off, (λ_d − λ_{d+1})/λ_d (``relative_eigengap``;
            None when λ_{d+1} is unknown). At or below ``EIGENGAP_RTOL`` the map is not unique.
        radius_calibration: what gives each placement its error radius (``core.trust.calibration``,
            docs/math.md §9), or None: placements then have no radius (NaN).
        bandwidth: σ of ``method="kernel"`` (docs/math.md §8.6) in the units of the core dissimilarities:
            ``kernel_bandwidth`` when given, else the §3.3 rule from the landmarks at fit (a skeleton map's own);
            None when there is none (``method="kernel"`` is then refused, saying why).
        kernel_bandwidth: the σ the user gave (None: the rule's); a refit keeps it.
        fit_baseline: what the drift detectors are armed from (``core.monitor.baseline``, docs/math.md §7.8),
            or None: they take their baseline from the stream.
    """

    spectrum: LandmarkSpectrum
    n_components: int
    landmark_ids: np.ndarray
    pipeline: InputPipeline
    fit_params: dict[str, Any]
    landmark_map: np.ndarray | None = None
    map_info: dict[str, Any] | None = None
    map_transform: MonotoneTransform | None = None
    rotation: np.ndarray | None = None
    shift: np.ndarray | None = None
    version: int = 1
    lineage: str = ""
    dissimilarities: np.ndarray | None = None
    features: np.ndarray | None = None
    metric: str | None = None
    random_state: int = 0
    n_threads: int | None = None
    negative_ratio: float | None = None
    eigengap: float | None = None
    radius_calibration: RadiusCalibration | None = None
    bandwidth: float | None = None
    kernel_bandwidth: float | None = None
    fit_baseline: FitBaseline | None = None
    _placer: Placer | None = field(default=None, init=False, repr=False, compare=False)
    _lock: Any = field(default_factory=threading.RLock, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        d = int(self.n_components)
        if self.rotation is None:
            object.__setattr__(self, "rotation", np.eye(d))
        if self.shift is None:
            object.__setattr__(self, "shift", np.zeros(d))
        if not self.lineage:
            object.__setattr__(self, "lineage", lineage_of(self))

    def __getstate__(self) -> dict[str, Any]:
        """Copies (``copy.deepcopy``, scikit-learn's clone checks) get their own lock and placer."""
        state = self.__dict__.copy()
        state["_placer"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        object.__setattr__(self, "_lock", threading.RLock())

    # ------------------------------------------------------------------ what it is
    @property
    def n_landmarks(self) -> int:
        return self.spectrum.n_landmarks

    @property
    def eigenvalues(self) -> np.ndarray:
        """(d,) the kept eigenvalues (squared distance units)."""
        return self.spectrum.eigenvalues[: int(self.n_components)]

    @property
    def negative_share(self) -> float:
        return float(self.spectrum.negative_share)

    @property
    def is_euclidean(self) -> bool:
        """Whether the landmark kernel has no negative eigenvalue beyond round-off (k0 is then PSD)."""
        return self.negative_share <= NEGATIVE_SHARE_TOL

    @property
    def map_unique(self) -> bool | None:
        """Whether λ_d > λ_{d+1} beyond ``EIGENGAP_RTOL`` (None when the eigengap is unknown)."""
        return None if self.eigengap is None else bool(self.eigengap > EIGENGAP_RTOL)

    @property
    def has_objects(self) -> bool:
        """Whether its landmarks are objects (strings, bytes, series) rather than feature vectors."""
        return self.features is not None and self.features.dtype == object

    @property
    def input_kind(self) -> str:
        return "similarity" if self.pipeline.similarity is not None else "dissimilarity"

    @property
    def input_width(self) -> int:
        """Columns of an input row: n dissimilarities, or n similarities + k(z, z) for a similarity model."""
        return self.n_landmarks + (1 if self.pipeline.similarity is not None else 0)

    @property
    def natural_embedding(self) -> np.ndarray:
        """(n, d) landmark configuration in the model's own frame: U_d Λ_d^{1/2}, or the refined map."""
        if self.landmark_map is not None:
            return self.landmark_map
        return self.spectrum.eigenvectors[:, : int(self.n_components)] * np.sqrt(self.eigenvalues)

    @property
    def embedding(self) -> np.ndarray:
        """(n, d) landmark configuration in the output frame."""
        return self.natural_embedding @ self.rotation + self.shift

    @property
    def is_aligned(self) -> bool:
        rotation, shift = np.asarray(self.rotation), np.asarray(self.shift)  # set by __post_init__
        return not (np.array_equal(rotation, np.eye(rotation.shape[0])) and not shift.any())

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary: version, lineage, landmarks, dimension, input, spectrum head."""
        return {"version": int(self.version), "lineage": self.lineage, "landmarks": self.n_landmarks,
                "dims": int(self.n_components), "input": self.input_kind, "metric": self.metric,
                **{k: v for k, v in self.fit_params.items() if k != "input"},
                "eigenvalues": [float(x) for x in self.eigenvalues],
                "negative_share": self.negative_share, "aligned": self.is_aligned,
                "eigengap": self.eigengap, "map_unique": self.map_unique,
                "monitored_eigenpairs": self.spectrum.rank,
                "radius_coverage": None if self.radius_calibration is None else self.radius_calibration.coverage,
                "bandwidth": self.bandwidth, "kernel_bandwidth": self.kernel_bandwidth,
                "drift_baseline_objects": None if self.fit_baseline is None else self.fit_baseline.n_objects}

    def check_method(self, method: str, block: bool = False) -> None:
        """Refuse a method this map cannot use (a refined map has no kernel projection; ``method="kernel"`` needs a
        bandwidth and places no block)."""
        kind = self.fit_params.get("landmark_map", "cmds") if self.landmark_map is not None else "cmds"
        refusal = block_refusal(method) if block else None
        if refusal is not None:
            raise InputError(refusal)
        if kind != "cmds" and block:
            raise InputError(
                f"block restricted reconstruction needs the classical-MDS map; landmark_map={kind!r} places objects "
                f"with method 'stress' (restricted reconstruction for a stress-built map, docs/math.md §3) or 'l1'"
            )
        check_options(method=method, landmark_map=kind)  # the option table's rule: a refined map needs a criterion
        problem = map_problem(method, self.placer.geometry)
        if problem is not None:
            raise InputError(problem)

    # ------------------------------------------------------------------ new models from this one
    def aligned(self, rotation: np.ndarray, shift: np.ndarray) -> LandmarkModel:
        """This model with outputs mapped by y ↦ y·R + shift (docs/math.md §5).

        Args:
            rotation: (d, d) orthogonal matrix R (rotation or reflection).
            shift: (d,) translation, in distance units.
        """
        d = int(self.n_components)
        R = np.asarray(rotation, dtype=np.float64)
        t = np.asarray(shift, dtype=np.float64)
        if R.shape != (d, d) or t.shape != (d,):
            raise InputError(f"alignment needs rotation ({d}, {d}) and shift ({d},), got {R.shape} and {t.shape}")
        if not np.allclose(R.T @ R, np.eye(d), atol=1e-8):
            raise InputError("alignment rotation must be orthogonal (RᵀR = I)")
        return replace(self, rotation=R, shift=t)

    def with_radius_calibration(self, calibration: RadiusCalibration | None) -> LandmarkModel:
        """This model with another radius calibration (None: no radius), e.g. another stated coverage."""
        return replace(self, radius_calibration=calibration)

    def with_kernel_bandwidth(self, sigma: float) -> LandmarkModel:
        """This model with the user's bandwidth σ for ``method="kernel"`` (a finite number > 0, else InputError)."""
        s = check_bandwidth(sigma, "kernel_bandwidth")
        return replace(self, bandwidth=s, kernel_bandwidth=s)
    def with_fit_baseline(self, baseline: FitBaseline | None) -> LandmarkModel:
        """This model with another fit baseline for the drift detectors (None: they baseline on the stream)."""
        return replace(self, fit_baseline=baseline)

    def with_version(self, version: int, lineage: str | None = None) -> LandmarkModel:
        return replace(self, version=int(version), lineage=self.lineage if lineage is None else lineage)

    # ------------------------------------------------------------------ placing objects (``core.place.placer``)
    @property
    def placer(self) -> Placer:
        """What placing on this map needs, built once (thread-safe) from the model's arrays and settings."""
        placer = self._placer
        if placer is None:
            with self._lock:
                if self._placer is None:
                    object.__setattr__(self, "_placer", self._build_placer())
                placer = self._placer
        assert placer is not None
        return placer

    def _build_placer(self) -> Placer:
        return Placer(self.spectrum, int(self.n_components), self.pipeline,
                      natural_embedding=self.natural_embedding, refined=self.landmark_map is not None,
                      map_kind=str(self.fit_params.get("landmark_map", "cmds")), map_transform=self.map_transform,
                      rotation=self.rotation, shift=self.shift, aligned=self.is_aligned, euclidean=self.is_euclidean,
                      negative_ratio=self.negative_ratio, n_threads=self.n_threads,
                      radius_calibration=self.radius_calibration, bandwidth=self.bandwidth)

    def place(self, A: object, C: object = None, *, method: str = DEFAULTS["method"],
              k0_rows: None | Literal["all"] | int = None, errors: Literal["raise", "mask"] = "raise",
              self_similarity: object = None) -> EmbeddingResult:
        """Embed a batch and say how much to trust each placement (``Placer.place``), output frame."""
        self.check_method(method, block=C is not None)
        return self._flag_rows(self.placer.place(A, C, method=method, k0_rows=k0_rows, errors=errors,
                                                 self_similarity=self_similarity))

    def place_blocks(self, A: object, cross: Any, sizes: Any = None, *,
                     k0_rows: None | Literal["all"] | int = None, errors: Literal["raise", "mask"] = "raise",
                     max_block_rows: int | None = None) -> EmbeddingResult:
        """Block RR of many blocks in one solver call (``Placer.place_blocks``), output frame."""
        self.check_method("projection", block=True)
        return self._flag_rows(self.placer.place_blocks(A, cross, sizes, k0_rows=k0_rows, errors=errors,
                                                        max_block_rows=max_block_rows))

    def _flag_rows(self, res: EmbeddingResult) -> EmbeddingResult:
        """``res`` with the flags of rows that cannot be right (``core.monitor.plausibility``, docs/math.md §4.8)."""
        limits = self.cached("row_limits", lambda: row_limits(self.spectrum, int(self.n_components),
                                                               self.fit_baseline))
        res.flags = res.flags | implausible_flags(res.beta, res.unexplained, limits)
        return res

    def to_frame(self, res: EmbeddingResult) -> EmbeddingResult:
        """Map a result from the model's own frame into the output frame (in place)."""
        return self.placer.to_frame(res)

    def residuals(self, A: object, C: object = None, k0_rows: None | Literal["all"] | int = "all",
                  n_window: int | None = None, self_similarity: object = None) -> tuple[EmbeddingResult, WindowBounds]:
        """Per-object residuals and the window bounds (``Placer.residuals``)."""
        return self.placer.residuals(A, C, k0_rows, n_window, self_similarity)

    def arc(self, A: object, s: float, self_similarity: object = None) -> np.ndarray:
        """The point at fraction s ∈ [0, 1] of the arc from projection (0) to RR (1), (m, d)."""
        self.check_method("restricted")
        return self.placer.arc(A, s, self_similarity)

    def core_dissimilarities(self, A: object, C: object = None,
                             self_similarity: object = None) -> tuple[np.ndarray, np.ndarray | None]:
        """The dissimilarities the spectrum is built on, for raw model input (``Placer.core_dissimilarities``)."""
        return self.placer.core_dissimilarities(A, C, self_similarity)

    def residual_projection(self, A: object, self_similarity: object = None) -> tuple[np.ndarray, np.ndarray]:
        """(ŷ_r (m, r), β (m,)) on every monitored eigenpair, float64, in the model's own eigenbasis.

        k0 = β - ‖ŷ_r‖² (docs/math.md §4). Input rows (raw model input) must already be valid.
        """
        return self.placer.residual_projection(A, self_similarity)

    def block_residual(self, A: object, C: object) -> np.ndarray:
        """K0 = β - Ŷ_r Ŷ_rᵀ (m, m) of a block from raw input A and its mutual C (docs/math.md §4)."""
        return self.placer.block_residual(A, C)

    def project_r(self, A_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ŷ_r (s, r), β (s,)) in float64 with every monitored eigenpair, from core dissimilarities."""
        return self.placer.project_r(A_rows)

    def cached(self, key: Any, compute: Any) -> Any:
        """A value derived from this (immutable) model, computed once, thread-safe (``Placer.cached``)."""
        return self.placer.cached(key, compute)

    def kernel(self, n_coords: int, dtype: np.dtype) -> ProjectionKernel:
        """The fused projection kernel on the first ``n_coords`` eigenpairs, for rows of ``dtype`` (cached)."""
        return self.placer.kernel(n_coords, dtype)

    # ------------------------------------------------------------------ feature mode
    def dissimilarities_to_landmarks(self, F: object, metric: Any = None) -> np.ndarray:
        """Feature mode: the model's input rows for feature rows F (m, p), or for m objects of an object model.

        Dissimilarities (m, n) to the landmarks; for a similarity model, kernel
        similarities with the self-similarity appended, (m, n + 1). The metric's
        own failures raise ``core.inputs.metrics.MetricError``. ``metric``: a
        ``Metric`` to use instead of resolving the model's by its name (the same
        metric with the deployment's limits, ``[metric]``).
        """
        if self.features is None:
            raise InputError("this model was not fitted from features (use fit_features)")
        if self.has_objects:
            return (metric if metric is not None else resolve_metric(str(self.metric)))(F, self.features)
        F64 = validation.as_float_array(F, "features", 2).astype(np.float64)
        p = self.features.shape[1]
        if F64.shape[1] != p:
            raise InputError(f"features have {F64.shape[1]} columns, the landmarks have {p} (shape {F64.shape})")
        if self.pipeline.similarity is not None:
            metric = self.metric
            assert metric is not None  # fit_features records the kernel of a similarity-input feature model
            K = kernel_input.feature_kernel(F64, self.features, metric)
            return np.hstack([K, kernel_input.feature_self_similarity(F64, metric)[:, None]])
        return resolve_metric(str(self.metric))(F64, self.features)


def lineage_of(model: LandmarkModel) -> str:
    """A map's identity: a digest of its landmark ids, input kind, metric, fit parameters and spectrum.

    Two models share a lineage when they were fitted on the same landmarks the
    same way; a refit inherits its predecessor's lineage instead (``replace``).
    """
    h = hashlib.sha256()
    doc = {"ids": [str(x) for x in model.landmark_ids], "metric": model.metric, "d": int(model.n_components),
           "params": {k: model.fit_params[k] for k in sorted(model.fit_params)}}
    h.update(json.dumps(doc, sort_keys=True, default=str).encode())
    for a in (model.spectrum.eigenvalues, model.spectrum.row_means):
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


def fit_model(
    M: object,
    *,
    n_components: int = DEFAULTS["n_components"],
    input: str = DEFAULTS["input"],
    geodesic_neighbors: int | None = DEFAULTS["geodesic_neighbors"],
    correction: str = DEFAULTS["correction"],
    landmark_map: str = DEFAULTS["landmark_map"],
    n_residual_components: int | None = DEFAULTS["n_residual_components"],
    eigensolver: str = DEFAULTS["eigensolver"],
    landmark_ids: Iterable[Any] | None = None,
    features: np.ndarray | None = None,
    metric: str | None = None,
    random_state: int = DEFAULTS["random_state"],
    n_threads: int | None = DEFAULTS["n_threads"],
    kernel_bandwidth: float | None = DEFAULTS["kernel_bandwidth"],
) -> LandmarkModel:
    """Fit a landmark map from M (n, n): dissimilarities (not squared), or similarities for input="similarity".

    The input pipeline, in order: similarities -> dissimilarities -> geodesic
    distances -> + additive constant -> the landmark spectrum (β, k0 and the
    bounds are those of this corrected kernel) -> the map (classical MDS, or
    refined by SMACOF / Sammon, or the ordinal map of ``core.fit.ordinal_map`` started
    from the classical MDS of the ranks). ``kernel_bandwidth``: σ of ``method="kernel"`` (None: the §3.3 rule
    from D_core, docs/math.md §8.6; σ = 0 or non-finite is refused). Raises InputError naming what is wrong.
    """
    check_options(input=input, correction=correction, landmark_map=landmark_map, eigensolver=eigensolver)
    sigma = None if kernel_bandwidth is None else check_bandwidth(kernel_bandwidth, "kernel_bandwidth")
    M_arr = np.asarray(M)
    input_dtype = M_arr.dtype if M_arr.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    pipeline = InputPipeline.build(input, geodesic_neighbors, correction)
    D_core, raw = pipeline.fit_landmarks(M_arr)
    d = int(n_components)
    spectrum, whole = fit_spectrum_eigh(D_core, n_residual_components, eigensolver, np.dtype(input_dtype), d)
    n = spectrum.n_landmarks
    if d > spectrum.rank:
        raise InputError(_too_few_eigenpairs(d, spectrum, n_residual_components))
    ids = _landmark_ids(landmark_ids, n)
    params = {"input": input, "geodesic_neighbors": None if geodesic_neighbors is None else int(geodesic_neighbors),
              "correction": correction, "landmark_map": landmark_map,
              "n_residual_components": n_residual_components, "eigensolver": eigensolver}
    negative_ratio = arrival_negative_ratio(D_core, spectrum, d, n_residual_components, eigensolver, whole)
    model = LandmarkModel(spectrum=spectrum, n_components=d, landmark_ids=ids, pipeline=pipeline, fit_params=params,
                          dissimilarities=raw, features=features, metric=metric, random_state=random_state,
                          n_threads=n_threads, negative_ratio=negative_ratio, eigengap=relative_eigengap(spectrum, d),
                          bandwidth=fit_bandwidth(D_core, sigma), kernel_bandwidth=sigma)
    if landmark_map != "cmds":
        start = rank_start(D_core, d) if landmark_map == "nonmetric" else None
        ref = refine_map(model.natural_embedding if start is None else start, D_core, landmark_map)
        model = replace(model, landmark_map=ref.X, lineage="", map_transform=ref.transform,
                        map_info={"criterion": float(ref.criterion), "iterations": int(ref.iterations),
                                  "converged": bool(ref.converged), "tolerance": float(ref.tolerance)})
    return model


def relative_eigengap(spectrum: LandmarkSpectrum, n_components: int) -> float | None:
    """(λ_d − λ_{d+1}) / λ_d at the map's cut-off (docs/math.md §4.6); None when λ_{d+1} is unknown.

    λ_{d+1} is the next kept eigenvalue, else the spectrum's ``next_eigenvalue``
    (≤ 0 when d is every positive eigenvalue: the gap is then ≥ 1).
    """
    d = int(n_components)
    lam = spectrum.eigenvalues
    nxt = float(lam[d]) if lam.shape[0] > d else float(spectrum.next_eigenvalue)
    if not (np.isfinite(nxt) and lam.shape[0] >= d and lam[d - 1] > 0):
        return None
    return float((lam[d - 1] - nxt) / lam[d - 1])


def _too_few_eigenpairs(d: int, spectrum: LandmarkSpectrum, n_residual: int | None) -> str:
    """Why d eigenpairs are not there: too few positive eigenvalues, or the partial solver's truncation."""
    n, r = spectrum.n_landmarks, spectrum.rank
    if spectrum.exact:
        return f"n_components={d} exceeds the {r} positive eigenvalues of the landmark kernel (n = {n} landmarks)"
    k = default_partial_rank(n) if n_residual is None else int(n_residual)
    if r < k:  # the partial solver found fewer positive eigenvalues than it computed: the kernel has no more
        return (f"n_components={d} exceeds the {r} positive eigenvalues the partial eigensolver found among the top "
                f"{k} of the landmark kernel (n = {n} landmarks)")
    how = "n_residual_components" if n_residual is not None else "the default n_residual_components"
    return (f"n_components={d} exceeds the {k} eigenpairs the partial eigensolver computed ({how}), all of them "
            f"positive, so the kernel may have more: pass n_residual_components >= {d} or eigensolver='full' "
            f"(n = {n} landmarks)")


def _landmark_ids(landmark_ids: Iterable[Any] | None, n: int) -> np.ndarray:
    if landmark_ids is None:  # the row numbers, as `streamembed fit` names landmarks of an input without ids
        return np.array([str(i) for i in range(n)])
    ids = np.asarray([str(x) for x in landmark_ids])
    if ids.shape != (n,):
        raise InputError(f"landmark_ids must have {n} entries, got shape {ids.shape}")
    if len(set(ids.tolist())) != n:
        raise InputError("landmark_ids must be unique")
    return ids
