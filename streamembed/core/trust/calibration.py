"""``RadiusCalibration``: what a model keeps to give each placement a radius with stated coverage (docs/math.md §9).

For a placement by method m of an object with core dissimilarities a (n,)
to the landmarks (a2 = a∘a, ā its mean), the score is

    s_m(z)² = ‖(a2 − ā) P_m + p_m‖² + κ_m² σ(z)²

where the first term is the error vector predicted from the object's first q
landmark coordinates (docs/math.md §9.4: P_m (n, d) and p_m (d,) come from a
ridge regression of calibration errors, zero when the calibration was too
small to spare objects for it) and σ(z) is the spread of its placements over
landmark-subset maps (``sensitivity.SensitivityMaps``, §9.3). The radius is

    r(z) = q̂_m · s_m(z),

q̂_m the split-conformal quantile (``conformal``) at the stated coverage of
the calibration ratios ‖y_m(c) − t(c)‖ / s_m(c) of objects c that did not
fit P_m. An object at dissimilarity 0 from a landmark is that landmark: the
map puts it where the map is defined, and its radius is 0 (calibration
objects get the same rule, so the stated coverage counts them honestly).
Every term is affine in a2: on the hot path one (m, n)·(n, d(B + 1)) product,
fused into the projection's own pass over the rows (``core.place.projection``:
:meth:`RadiusCalibration.radius_kernel` gives its columns, :meth:`radius_from`
the radius from them and the kernel's zero-entry flags).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import InputError
from ..fit.cmds import LandmarkSpectrum
from ..place.projection import ProjectionKernel
from .conformal import check_coverage, conformal_quantile, conformal_rank, min_calibration_objects
from .sensitivity import SensitivityMaps

__all__ = ["CALIBRATION_VERSION", "MethodCalibration", "RadiusCalibration"]

#: Version of the calibration block in model files (``state``/``from_state``).
CALIBRATION_VERSION = 1


@dataclass(frozen=True)
class MethodCalibration:
    """One placement method's part of the calibration.

    Attributes:
        error_weights: (n, d) P_m, the predicted error per unit of centred squared dissimilarity.
        error_offsets: (d,) p_m, map units.
        kappa2: κ_m², the weight of the subset spread σ² in the squared score.
        ratios: (k,) sorted conformal ratios error / score of the calibration objects that did not fit P_m.
    """

    error_weights: np.ndarray
    error_offsets: np.ndarray
    kappa2: float
    ratios: np.ndarray


@dataclass(frozen=True, eq=False)
class RadiusCalibration:
    """The calibration of the radius (see the module doc); immutable, thread-safe.

    Attributes:
        coverage: the stated probability c that the full-MDS position lies within the radius.
        sensitivity: the landmark-subset maps (σ).
        methods: method name -> its ``MethodCalibration`` ("projection", "restricted").
        info: how it was made: calibration objects, whether they were split, q, the full MDS's size.
    """

    coverage: float
    sensitivity: SensitivityMaps
    methods: dict[str, MethodCalibration]
    info: dict[str, Any] = field(default_factory=dict)
    _cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    _lock: Any = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "coverage", check_coverage(self.coverage))

    def __getstate__(self) -> dict[str, Any]:
        """Copies (``copy.deepcopy``, pickling by scikit-learn's checks) get their own lock and kernels."""
        state = self.__dict__.copy()
        state["_cache"] = {}
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        object.__setattr__(self, "_lock", threading.Lock())

    def with_coverage(self, coverage: float) -> RadiusCalibration:
        """The same calibration stating another coverage (the quantile is recomputed from the stored ratios)."""
        return replace(self, coverage=check_coverage(coverage))

    def quantile(self, method: str) -> float:
        """q̂ of ``method`` at the stated coverage; inf when it has too few ratios for it; KeyError if uncalibrated."""
        return conformal_quantile(self.methods[method].ratios, self.coverage)

    def shortfall(self, method: str) -> int:
        """How many more calibration objects ``method`` needs for the stated coverage (0: enough)."""
        k = int(self.methods[method].ratios.size)
        return max(0, min_calibration_objects(self.coverage) - k) if conformal_rank(k, self.coverage) > k else 0

    def score(self, A: np.ndarray, method: str) -> np.ndarray:
        """s_m(z) (m,) float64 in map units from core dissimilarities A (m, n) to the landmarks.

        The fused projection kernel (``core.place.projection``) squares the rows and multiplies them into
        the d(B + 1) columns [P_m | G] in one pass, in the rows' precision.
        """
        dt = np.dtype(np.float32) if A.dtype == np.float32 else np.dtype(np.float64)
        kernel = self._affine(method, dt)[0]
        return self._score_of(kernel(np.ascontiguousarray(A, dtype=dt))[0], method)

    def _score_of(self, Z: np.ndarray, method: str) -> np.ndarray:
        """s_m from the output Z (m, k + 1) of ``radius_kernel(method)`` (its last column unused; changed in place)."""
        _, off, scale = self._affine(method, Z.dtype)
        Z = Z[:, :-1]
        Z += off
        Z *= scale  # 1 on the predicted error's d columns, κ_m/√B on the B·d deviations
        return np.sqrt(np.einsum("ij,ij->i", Z, Z), dtype=np.float64)

    def gives_radius(self, method: str) -> bool:
        """Whether ``method`` gets radii (calibrated, with enough objects for the stated coverage)."""
        return method in self.methods and bool(np.isfinite(self.quantile(method)))

    def radius(self, A: np.ndarray, method: str) -> np.ndarray:
        """r(z) = q̂_m · s_m(z) (m,) float64, map units; 0 at a landmark; NaN for an uncalibrated method or
        when the calibration has too few objects for the stated coverage."""
        m = A.shape[0]
        if not self.gives_radius(method):
            return np.full(m, np.nan)
        r = self.quantile(method) * self.score(A, method)
        r[np.min(A, axis=1) == 0] = 0.0
        return r

    def radius_kernel(self, method: str, dtype: np.dtype) -> ProjectionKernel:
        """The kernel of the score's columns for rows of ``dtype`` (fused into the projection's pass by the
        placer: ``ProjectionKernel.fused``; cached)."""
        return self._affine(method, np.dtype(dtype))[0]

    def radius_from(self, Z: np.ndarray, at_landmark: np.ndarray, method: str) -> np.ndarray:
        """:meth:`radius` from the output Z (m, k + 1) of :meth:`radius_kernel` (changed in place) and which rows
        hold an entry equal to zero (m,) bool (a valid row's minimum is then 0: it is a landmark)."""
        if not self.gives_radius(method):
            return np.full(Z.shape[0], np.nan)
        r = self.quantile(method) * self._score_of(Z, method)
        r[at_landmark] = 0.0
        return r

    def _affine(self, method: str, dt: np.dtype) -> tuple[ProjectionKernel, np.ndarray, np.ndarray]:
        """(the kernel of a2 ↦ (a2 − ā)·[P_m | G], the offsets [p_m | h], the column weights [1 | κ_m/√B]) for
        rows of dtype ``dt`` (cached).

        The kernel projects on "eigenvectors" −2·[P_m | G] with unit eigenvalues and zero row means: its
        W is [P_m | G] less its column means and its constant 0, so it gives (a2 − ā)·[P_m | G] (every
        column of P_m and G is orthogonal to the ones vector: the ā term is round-off, taken out).
        """
        key = (method, dt.str)
        hit = self._cache.get(key)
        if hit is None:
            mc = self.methods[method]
            sm = self.sensitivity
            M = np.hstack([mc.error_weights, sm.weights])
            k = M.shape[1]
            frame = LandmarkSpectrum(eigenvalues=np.ones(k), eigenvectors=-2.0 * M, row_means=np.zeros(M.shape[0]),
                                     grand_mean=0.0, negative_share=0.0, exact=True)
            off = np.concatenate([mc.error_offsets, sm.offsets]).astype(dt)
            scale = np.concatenate([np.ones(mc.error_offsets.shape[0]),
                                    np.full(sm.offsets.shape[0], np.sqrt(float(mc.kappa2) / sm.n_maps))]).astype(dt)
            hit = (ProjectionKernel(frame, k, dt), off, scale)
            with self._lock:
                self._cache[key] = hit
        return hit

    # ------------------------------------------------------------------ model files
    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays, JSON metadata) for a model file: plain float arrays, no pickle."""
        arrays = {"radius_sensitivity_weights": self.sensitivity.weights,
                  "radius_sensitivity_offsets": self.sensitivity.offsets}
        methods = {}
        for name, mc in self.methods.items():
            arrays[f"radius_{name}_error_weights"] = mc.error_weights
            arrays[f"radius_{name}_error_offsets"] = mc.error_offsets
            arrays[f"radius_{name}_ratios"] = mc.ratios
            methods[name] = {"kappa2": float(mc.kappa2)}
        meta = {"version": CALIBRATION_VERSION, "coverage": self.coverage, "methods": methods,
                "info": dict(self.info)}
        return arrays, meta

    @classmethod
    def from_state(cls, files: dict[str, np.ndarray], meta: Any, n: int, d: int) -> RadiusCalibration:
        """The calibration of a model file's arrays and ``meta`` block, checked against n landmarks and d
        dimensions; ValueError naming what is wrong."""
        if not isinstance(meta, dict) or meta.get("version") != CALIBRATION_VERSION:
            raise ValueError(f"the radius calibration has version {getattr(meta, 'get', lambda _: None)('version')!r}"
                             f"; this streamembed reads {CALIBRATION_VERSION}")
        methods_meta = meta.get("methods")
        if not isinstance(methods_meta, dict) or not methods_meta:
            raise ValueError("the radius calibration names no method")
        G, h = files["radius_sensitivity_weights"], files["radius_sensitivity_offsets"]
        if G.ndim != 2 or G.shape[0] != n or G.shape[1] % d or h.shape != (G.shape[1],) or G.shape[1] == 0:
            raise ValueError(f"radius sensitivity arrays of shapes {G.shape} and {h.shape} for n = {n}, d = {d}")
        methods = {}
        for name, mm in methods_meta.items():
            P, p, ratios = (files[f"radius_{name}_{k}"] for k in ("error_weights", "error_offsets", "ratios"))
            kappa2 = mm.get("kappa2") if isinstance(mm, dict) else None
            if (P.shape != (n, d) or p.shape != (d,) or ratios.ndim != 1 or isinstance(kappa2, bool)
                    or not isinstance(kappa2, (int, float)) or not kappa2 >= 0):
                raise ValueError(f"radius calibration of method {name!r}: arrays {P.shape}, {p.shape}, {ratios.shape}"
                                 f" and kappa2 {kappa2!r} for n = {n}, d = {d}")
            if not (np.isfinite(P).all() and np.isfinite(p).all() and (ratios >= 0).all()):
                raise ValueError(f"radius calibration of method {name!r} holds non-finite or negative values")
            methods[str(name)] = MethodCalibration(P.astype(np.float64), p.astype(np.float64), float(kappa2),
                                                   np.sort(ratios.astype(np.float64)))
        if not (np.isfinite(G).all() and np.isfinite(h).all()):
            raise ValueError("radius sensitivity arrays hold non-finite values")
        try:
            coverage = check_coverage(meta.get("coverage"))
        except InputError as exc:
            raise ValueError(f"radius calibration: {exc}") from None
        info = meta.get("info")
        return cls(coverage=coverage, sensitivity=SensitivityMaps(G.astype(np.float64), h.astype(np.float64), d),
                   methods=methods, info=dict(info) if isinstance(info, dict) else {})
