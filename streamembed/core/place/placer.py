"""``Placer``: everything placing a batch on one fitted map needs, built once per model (docs/math.md §2–4).

``LandmarkModel.placer`` builds one lazily from the model's arrays and
settings (it never sees the model, so it cannot call back into it), and
``LandmarkModel.place`` and its siblings forward to it. It owns what is
derived from the map: the fused projection kernels (``core.place.projection``),
the placeable range per dtype (``core.place.range_guard``), the ``non_euclidean``
flag's threshold (``core.monitor.calibration``) and the map the criteria use
(``core.place.dispatch.MapGeometry``). A batch goes:

1. raw rows -> the input pipeline (``core.inputs.transforms``; nothing for a plain
   dissimilarity model, whose rows go straight to the fused kernel);
2. the fused projection kernel gives ŷ and β for every row and finds the
   rows that need a closer look (NaN, inf, negative entries);
3. the range guard refuses rows beyond what the model can place in their
   dtype (``out_of_range``) before any iterative method sees them;
4. the method's routine (``core.place.dispatch``), or block RR (``core.place.block.batch``);
5. exact k0 on the requested sample of rows, flags, blanked invalid rows.

Results leave in the output frame (y·R + shift, docs/math.md §5).
Thread-safe: derived values are computed once under a lock, and the
kernels keep no per-call state between threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from ..errors import InputError
from ..fit.cmds import LandmarkSpectrum
from ..fit.ordinal_map import MonotoneTransform
from ..flags import FLAG_NON_EUCLIDEAN
from ..inputs import validation
from ..inputs.centering import center_block
from ..inputs.transforms import InputPipeline
from ..inputs.validation import Problem, ProblemCode
from ..monitor.bounds import WindowBounds, window_bounds
from ..monitor.calibration import landmark_negative_ratio, non_euclidean_flags
from ..monitor.residuals import K0_RTOL, block_k0, k0_diagonal, landmark_trace, unexplained
from ..result import EmbeddingResult
from ..trust.calibration import RadiusCalibration
from . import range_guard
from .dispatch import MapGeometry
from .methods import route
from .projection import FusedProjection, ProjectionKernel
from .restricted import restricted_arc

__all__ = ["Placer"]

K0Rows = None | Literal["all"] | int


class Placer:
    """Places batches on one fitted map (see the module doc); built by ``LandmarkModel.placer``.

    Args:
        spectrum: the landmark spectrum.
        n_components: d, the map's dimension.
        pipeline: the fitted input transforms.
        natural_embedding: (n, d) the landmarks in the model's own frame (U_d Λ_d^{1/2}, or the refined map).
        refined: whether that map is refined (SMACOF / Sammon / non-metric: no kernel projection of its own).
        map_kind: the fit's ``landmark_map`` ("cmds", "smacof", "sammon", "nonmetric").
        map_transform: a non-metric map's monotone transformation, else None.
        rotation, shift: (d, d) and (d,): outputs are y·R + shift; aligned: False when that is the identity.
        euclidean: the landmark kernel has no negative eigenvalue beyond round-off.
        negative_ratio: the ``non_euclidean`` flag's threshold on −k0/β
            (None: the landmarks' own ratio, ``calibration.landmark_negative_ratio``).
        n_threads: threads of the projection kernels and solvers (None: ``runtime.default_threads()``).
        radius_calibration: gives each single-object placement its error radius (docs/math.md §9), or None.
        bandwidth: σ of kernel placement (``MapGeometry.bandwidth``, docs/math.md §8.6), or None.
    """

    def __init__(self, spectrum: LandmarkSpectrum, n_components: int, pipeline: InputPipeline, *,
                 natural_embedding: np.ndarray, refined: bool, map_kind: str, map_transform: MonotoneTransform | None,
                 rotation: np.ndarray | None, shift: np.ndarray | None, aligned: bool, euclidean: bool,
                 negative_ratio: float | None, n_threads: int | None,
                 radius_calibration: RadiusCalibration | None = None, bandwidth: float | None = None):
        d = int(n_components)
        self.spectrum, self.n_components, self.pipeline, self.n_threads = spectrum, d, pipeline, n_threads
        self.n_landmarks = spectrum.n_landmarks
        self.eigenvalues = spectrum.eigenvalues[:d]
        self.rotation, self.shift, self.aligned, self.euclidean = rotation, shift, aligned, euclidean
        self.negative_ratio = landmark_negative_ratio(spectrum) if negative_ratio is None else negative_ratio
        self.geometry = MapGeometry(X=natural_embedding, refined=refined, sammon=map_kind == "sammon",
                                    transform=map_transform, row_means=spectrum.row_means, bandwidth=bandwidth)
        self.radius_calibration = radius_calibration
        self._cache: dict[Any, Any] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ derived once
    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """A value derived from this map (kernels, limits), computed once, thread-safe."""
        try:
            return self._cache[key]  # the hot path: no lock once computed
        except KeyError:
            pass
        with self._lock:  # re-entrant: a computation may need another cached value
            if key not in self._cache:
                self._cache[key] = compute()
            return self._cache[key]

    def kernel(self, n_coords: int, dtype: np.dtype) -> ProjectionKernel:
        """The fused projection kernel on the first ``n_coords`` eigenpairs, for rows of ``dtype`` (cached)."""
        dt = np.dtype(dtype)
        return self.cached((n_coords, dt.str), lambda: ProjectionKernel(self.spectrum, n_coords, dt, self.n_threads))

    def energy_limit(self, dtype: np.dtype) -> float:
        """``range_guard.energy_limit`` of this map's d-coordinate kernel for ``dtype`` (cached)."""
        dt = np.dtype(dtype)
        d = self.n_components
        return self.cached(("energy_limit", dt.str), lambda: range_guard.energy_limit(self.kernel(d, dt).W, d, dt))

    def range_limit(self, dtype: np.dtype) -> tuple[float, str]:
        """(the largest placeable mean squared dissimilarity in ``dtype``, what sets it: "precision" or "overflow")."""
        return range_guard.range_limit(self.energy_limit(dtype),
                                       range_guard.precision_limit(self.spectrum.grand_mean, dtype))

    def project_r(self, A_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ŷ_r (s, r), β (s,)) in float64 with every monitored eigenpair, from core dissimilarities (s, n)."""
        r = self.spectrum.rank
        Z, _ = self.kernel(r, np.dtype(np.float64))(np.ascontiguousarray(A_rows, dtype=np.float64))
        return Z[:, :r], Z[:, r]

    def to_frame(self, res: EmbeddingResult) -> EmbeddingResult:
        """Map a result from the model's own frame into the output frame (in place); a result without a
        radius (blocks, uncalibrated methods) gets NaN radii."""
        if res.radius is None:
            res.radius = np.full(len(res), np.nan)
        if self.aligned:
            assert self.rotation is not None and self.shift is not None  # an aligned model has both
            res.y = res.y @ self.rotation + self.shift
        return res

    # ------------------------------------------------------------------ placing (output frame)
    def place(self, A: object, C: object, *, method: str, k0_rows: K0Rows = None,
              errors: str = "raise", self_similarity: object = None) -> EmbeddingResult:
        """Embed a batch (``LandmarkModel.place``; ``LandmarkModel.check_method`` has accepted ``method``).

        Args:
            A: (m, n) dissimilarities (not squared) to the landmarks, float32 or
               float64 (the hot path runs in that precision); for a similarity
               model (m, n) similarities, or (m, n + 1) with k(z, z) last.
            C: (m, m) mutual dissimilarities (similarities for a similarity model,
               whose diagonal then gives k(z, z)): the batch is one block (multi-point RR).
            method: a single-object method of ``core.place.methods.PLACEMENT_METHODS``.
            k0_rows: exact k0 for None (no rows), "all", or an int s (s evenly spaced rows).
            errors: "raise" (InputError on the first bad row) or "mask" (bad rows
               get valid=False, a Problem and NaN numbers).
            self_similarity: (m,) k(z, z) for a similarity model with (m, n) rows.
        """
        return self.to_frame(self._place(A, C, method, k0_rows, errors, self_similarity))

    def place_blocks(self, A: object, cross: Sequence[object], sizes: Sequence[int] | None = None, *,
                     k0_rows: K0Rows = None, errors: str = "raise",
                     max_block_rows: int | None = None) -> EmbeddingResult:
        """Block RR of many blocks in one solver call (docs/math.md §3.3).

        Args:
            A: (m, n) rows of every block, blocks consecutive (raw model input).
            cross: one k_i×k_i matrix of mutual dissimilarities (similarities) per block.
            sizes: rows per block (default: each matrix's row count).
            k0_rows: None (no k0), or anything else: exact k0 for every member
               and ‖K0‖₂ per block (``block_norm_k0`` is their largest).
            errors: "raise" (InputError for the first bad block) or "mask" (the
               rows of a bad block get valid=False and a ``bad_block`` Problem, or
               the member's own problem; the other blocks are placed).
            max_block_rows: a larger block is refused (``bad_block``).
        """
        return self.to_frame(self._place_blocks(A, cross, sizes, k0_rows, errors, max_block_rows))

    def residuals(self, A: object, C: object = None, k0_rows: K0Rows = "all", n_window: int | None = None,
                  self_similarity: object = None) -> tuple[EmbeddingResult, WindowBounds]:
        """Per-object residuals (β, unexplained, exact k0) and the window bounds (docs/math.md §4).

        The window is the batch A (or the block A with C, which makes ‖k0‖₂ and
        the kernel-distance error exact); with ``k0_rows`` an int, Tr(k0) and the
        Nyström spectrum are estimated from that sample, while Σu bounds Tr(k0)
        (``bounds.window_bounds``). A is raw model input; the residuals are those
        of the corrected landmark kernel. The result's ``y`` is the projection
        (NaN for a refined map, which has no projection).
        """
        A_arr = self._core_rows(A, self_similarity)
        res = self._place_rows(A_arr, None, None, "projection", k0_rows, "raise")
        if self.geometry.refined:
            res.y[:] = np.nan
        rows = res.residual_rows if res.residual_rows is not None else np.empty(0, dtype=np.int64)
        ok = np.isfinite(res.k0[rows])
        sample = rows[ok]
        y_r = res.residual_coords[ok] if res.residual_coords is not None else np.empty((0, self.spectrum.rank))
        K0 = None if C is None else self.block_residual(A, C)
        u = res.unexplained[np.isfinite(res.unexplained)]
        whole = n_window is None or n_window == u.size  # Σu over the batch is the window's
        sp = self.spectrum
        bounds = window_bounds(res.k0[sample], y_r, sp.eigenvalues, self.n_components, self.n_landmarks,
                               n_window=A_arr.shape[0] if n_window is None else n_window, K0=K0,
                               u_sum=float(u.sum()) if whole else None,
                               landmark_trace=landmark_trace(sp.row_means, sp.grand_mean, sp.eigenvalues),
                               euclidean=self.euclidean,
                               rtol=K0_RTOL.get(np.dtype(A_arr.dtype), 1e-7))
        return self.to_frame(res), bounds

    def arc(self, A: object, s: float, self_similarity: object = None) -> np.ndarray:
        """The point at fraction s ∈ [0, 1] of the arc from projection (0) to RR (1), (m, d), output frame."""
        res = self._place(A, None, "restricted", None, "raise", self_similarity)
        if s != 1.0:
            y_proj = self._place(A, None, "projection", None, "raise", self_similarity).y
            res.y = restricted_arc(y_proj * np.sqrt(self.eigenvalues), self.eigenvalues, res.t, s)
        return self.to_frame(res).y

    # ------------------------------------------------------------------ core dissimilarities
    def core_dissimilarities(self, A: object, C: object = None,
                             self_similarity: object = None) -> tuple[np.ndarray, np.ndarray | None]:
        """The dissimilarities the landmark spectrum is built on, for raw model input.

        Applies the input pipeline (identity for a plain model) to A (m, n) [or
        (m, n + 1)] and the block's C (m, m). Raises InputError on any invalid row.

        Returns: (A (m, n) float64, C (m, m) float64 or None).
        """
        A_raw = validation.as_float_array(A, "A", 2)
        n = self.n_landmarks
        if C is not None:
            if self.pipeline.identity:
                A64 = validation.check_rows(A_raw, n, "A").astype(np.float64)
                return A64, validation.check_cross(C, A64.shape[0])
            return self.pipeline.block(A_raw, C, n)
        if self.pipeline.identity:
            return validation.check_rows(A_raw, n, "A").astype(np.float64), None
        rows = self.pipeline.rows(A_raw, n, self_similarity)
        if not rows.valid.all():
            i = int(np.argmin(rows.valid))
            raise InputError(f"row {i} of A is invalid: {rows.problems[i]}")
        if not rows.known_beta.all():
            raise InputError("the self-similarity k(z, z) is needed: pass self_similarity or (m, n + 1) rows")
        return rows.A.astype(np.float64), None

    def residual_projection(self, A: object, self_similarity: object = None) -> tuple[np.ndarray, np.ndarray]:
        """(ŷ_r (m, r), β (m,)) on every monitored eigenpair, float64, in the model's own eigenbasis."""
        if not self.pipeline.identity:
            return self.project_r(self.core_dissimilarities(A, None, self_similarity)[0])
        return self.project_r(validation.check_rows(A, self.n_landmarks, "A"))

    def block_residual(self, A: object, C: object) -> np.ndarray:
        """K0 = β - Ŷ_r Ŷ_rᵀ (m, m) of a block from raw input A and its mutual C (docs/math.md §4)."""
        A64, C64 = self.core_dissimilarities(A, C)
        assert C64 is not None
        _, Beta = center_block(np.square(A64), np.square(C64), self.spectrum.row_means, self.spectrum.grand_mean)
        return block_k0(Beta, self.project_r(A64)[0])

    def _core_rows(self, A: object, self_similarity: object) -> np.ndarray:
        if not self.pipeline.identity:
            return self.core_dissimilarities(A, None, self_similarity)[0]
        return validation.check_rows(A, self.n_landmarks, "A")

    # ------------------------------------------------------------------ the model's own frame
    def _place(self, A: object, C: object, method: str, k0_rows: object, errors: str,
               self_similarity: object) -> EmbeddingResult:
        if errors not in ("raise", "mask"):
            raise InputError(f"errors must be 'raise' or 'mask', got {errors!r}")
        if self_similarity is not None and self.pipeline.similarity is None:
            raise InputError("self_similarity is only for input='similarity' models")
        if not self.pipeline.identity:
            return self._place_transformed(A, C, self_similarity, method, k0_rows, errors)
        A_arr = validation.check_rows(A, self.n_landmarks, "A")
        if C is not None:
            return self._core_blocks(A_arr, [C], np.array([A_arr.shape[0]]), k0_rows, errors, name="C")
        return self._place_rows(A_arr, None, None, method, k0_rows, errors)

    def _place_rows(self, A_arr: np.ndarray, valid: np.ndarray | None, reasons: list[Problem | None] | None,
                    method: str, k0_rows: object, errors: str) -> EmbeddingResult:
        """Single objects from dissimilarities A_arr (m, n) the spectrum is built on."""
        d = self.n_components
        routine = route(method)
        cal = self.radius_calibration
        radius_cols: tuple[np.ndarray, np.ndarray] | None = None
        if cal is not None and cal.gives_radius(method):  # the radius's columns in the projection's pass
            Z, suspect, at_landmark, Zr = _fused_kernel(self, cal, A_arr.dtype, method)(A_arr)
            radius_cols = (Zr, at_landmark)
        else:
            Z, suspect = self.kernel(d, A_arr.dtype)(A_arr)
        m = A_arr.shape[0]
        valid = np.ones(m, dtype=bool) if valid is None else valid
        reasons = [None] * m if reasons is None else reasons
        for i in np.flatnonzero(suspect & valid):
            why = validation.describe_bad_row(A_arr[i], "A")
            if why is not None:
                if errors == "raise":
                    raise InputError(f"row {i} of A is invalid: {why}")
                valid[i], reasons[i] = False, why
        g = self.spectrum.grand_mean
        with np.errstate(invalid="ignore", over="ignore"):
            # Z[:, d] = β = (mean squared dissimilarity) - g/2: compared in place, no copy of the column
            limit, why_limit = self.range_limit(A_arr.dtype)
            for i in np.flatnonzero(valid & ~(Z[:, d] <= limit - 0.5 * g)):
                detail = range_guard.range_detail(float(Z[i, d]) + 0.5 * g, limit, why_limit, A_arr.dtype, g)
                if errors == "raise":
                    raise InputError(f"row {i} of A is invalid: {Problem(ProblemCode.OUT_OF_RANGE, detail)}")
                valid[i], reasons[i] = False, Problem(ProblemCode.OUT_OF_RANGE, detail)
            return self._finish(A_arr, Z, valid, reasons, method, routine, k0_rows, radius_cols)

    def _finish(self, A_arr: np.ndarray, Z: np.ndarray, valid: np.ndarray, reasons: list[Problem | None],
                method: str, routine: Callable[..., Any], k0_rows: object,
                radius_cols: tuple[np.ndarray, np.ndarray] | None = None) -> EmbeddingResult:
        d, m = self.n_components, A_arr.shape[0]
        y = Z[:, :d].astype(np.float64)
        beta = Z[:, d].astype(np.float64)
        unexpl = unexplained(beta, y)
        y, t, flags = routine(A_arr, y, beta, self.eigenvalues, valid, np.full(m, np.nan),
                              np.zeros(m, dtype=np.uint32), self.geometry)
        k0 = np.full(m, np.nan)
        sample = _k0_sample(k0_rows, np.flatnonzero(valid))
        coords = None
        if sample.size:
            coords, beta_r = self.project_r(A_arr[sample])
            k0[sample] = k0_diagonal(beta_r, coords)
            flags[sample] |= non_euclidean_flags(k0[sample], beta[sample], self.negative_ratio, A_arr.dtype)
        flags[(beta < 0) & valid] |= FLAG_NON_EUCLIDEAN
        lost = valid & ~np.isfinite(unexpl)  # a non-finite coordinate makes β - ‖y‖² non-finite too
        for i in np.flatnonzero(lost):  # never expected past the range guard: never an output with inf
            valid[i], reasons[i] = False, Problem(ProblemCode.OUT_OF_RANGE,
                                                  "the placement overflowed (non-finite result)")
        placed = None if method == "projection" else unexplained(beta, y)
        cal = self.radius_calibration
        if cal is None or radius_cols is None:
            radius = np.full(m, np.nan)
        else:
            radius = cal.radius_from(radius_cols[0], radius_cols[1], method)
        res = EmbeddingResult(y=y, beta=beta, unexplained=unexpl, k0=k0, t=t, flags=flags, valid=valid,
                              reasons=reasons, method=method, residual_rows=sample if sample.size else None,
                              residual_coords=coords, unexplained_placed=placed, radius=radius)
        if not valid.all():
            _blank(res, ~valid)
        return res

    def _place_blocks(self, A: object, cross: Sequence[object], sizes: Sequence[int] | None, k0_rows: object,
                      errors: str, max_block_rows: int | None) -> EmbeddingResult:
        if errors not in ("raise", "mask"):
            raise InputError(f"errors must be 'raise' or 'mask', got {errors!r}")
        cross = list(cross)
        sizes_arr = np.array([np.shape(c)[0] if np.ndim(c) == 2 else 0 for c in cross]  # type: ignore[call-overload, arg-type]  # any array-like
                             if sizes is None else sizes,
                             dtype=np.int64)
        A_raw = validation.as_float_array(A, "A", 2)
        n = self.n_landmarks
        if sizes_arr.size != len(cross) or int(sizes_arr.sum()) != A_raw.shape[0]:
            raise InputError(f"{len(cross)} cross matrices with block sizes summing to {int(sizes_arr.sum())}, "
                             f"but A has {A_raw.shape[0]} rows")
        if self.pipeline.identity:
            return self._core_blocks(validation.check_rows(A_raw, n, "A"), cross, sizes_arr, k0_rows, errors,
                                     max_block_rows)
        # the input pipeline block by block (similarities, geodesics, constant): not the hot path
        off = np.concatenate([[0], np.cumsum(sizes_arr)])
        rows, mats, early = [], [], []
        for b, C in enumerate(cross):
            try:
                Ab, Cb = self.pipeline.block(A_raw[off[b]:off[b + 1]], C, n)
            except InputError as exc:
                if errors == "raise":
                    raise
                early.append((b, Problem(ProblemCode.BAD_BLOCK, str(exc))))
                Ab, Cb = np.zeros((int(sizes_arr[b]), n)), np.full((int(sizes_arr[b]),) * 2, np.nan)
            rows.append(Ab)
            mats.append(Cb)
        A_core = np.vstack(rows) if rows else np.empty((0, n))
        res = self._core_blocks(A_core, mats, sizes_arr, k0_rows, errors, max_block_rows)
        for b, why in early:
            res.reasons[off[b]:off[b + 1]] = [why] * int(sizes_arr[b])
        return res

    def _core_blocks(self, A: np.ndarray, cross: list[Any], sizes: np.ndarray, k0_rows: object, errors: str,
                     max_block_rows: int | None = None, name: str = "cross") -> EmbeddingResult:
        from .block.batch import place_core_blocks  # the block solver: imported by the first block

        return place_core_blocks(A, cross, sizes, spectrum=self.spectrum, n_components=self.n_components,
                                 limit=self.range_limit(A.dtype), project_r=self.project_r,
                                 negative_ratio=self.negative_ratio, n_threads=self.n_threads, k0_rows=k0_rows,
                                 errors=errors, max_block_rows=max_block_rows, name=name)

    def _place_transformed(self, A: object, C: object, kappa: object, method: str, k0_rows: object,
                           errors: str) -> EmbeddingResult:
        """Embed raw input through similarities -> geodesics -> additive constant (``core.inputs.transforms``)."""
        A_raw = validation.as_float_array(A, "A", 2)
        m = A_raw.shape[0]
        if C is not None:
            if kappa is not None:
                raise InputError("with a block, k(z, z) comes from the diagonal of C: do not pass self_similarity")
            return self._place_blocks(A_raw, [C], [m], k0_rows, errors, None)
        rows = self.pipeline.rows(A_raw, self.n_landmarks, kappa)
        if errors == "raise" and not rows.valid.all():
            i = int(np.argmin(rows.valid))
            raise InputError(f"row {i} of A is invalid: {rows.problems[i]}")
        known = rows.known_beta
        if not known.all() and method != "projection":
            raise InputError(f"method={method!r} needs the self-similarity k(z, z): pass self_similarity (m,) "
                             f"or rows of {self.n_landmarks + 1} columns (docs/math.md §2)")
        res = self._place_rows(rows.A, rows.valid, rows.problems, method, k0_rows, errors)
        if not known.all():  # β is unknown: the projection is exact, its residuals are not
            for name in ("beta", "unexplained", "k0", "unexplained_placed"):
                if getattr(res, name) is not None:
                    getattr(res, name)[~known] = np.nan
            res.flags[~known] &= ~FLAG_NON_EUCLIDEAN
        return res


def _fused_kernel(placer: Placer, cal: RadiusCalibration, dtype: np.dtype, method: str) -> FusedProjection:
    """The d-coordinate projection kernel with ``method``'s radius columns in the same pass (cached)."""
    dt, d = np.dtype(dtype), placer.n_components
    return placer.cached(("fused", d, dt.str, method),
                         lambda: placer.kernel(d, dt).fused(cal.radius_kernel(method, dt)))


def _k0_sample(k0_rows: object, valid_rows: np.ndarray) -> np.ndarray:
    """The rows whose exact k0 is computed: none, all valid rows, or s evenly spaced ones (deterministic)."""
    if k0_rows is None or valid_rows.size == 0:
        return np.empty(0, dtype=np.int64)
    if isinstance(k0_rows, str):
        if k0_rows != "all":
            raise InputError(f"k0_rows must be None, 'all' or an int, got {k0_rows!r}")
        return valid_rows
    s = int(k0_rows)  # type: ignore[call-overload]
    if s < 0:
        raise InputError(f"k0_rows must be non-negative, got {s}")
    if s >= valid_rows.size:
        return valid_rows
    return valid_rows[np.linspace(0, valid_rows.size - 1, s).round().astype(np.int64)] if s else valid_rows[:0]


def _blank(res: EmbeddingResult, rows: np.ndarray) -> None:
    res.y = res.y.copy()
    res.y[rows] = np.nan
    for name in ("beta", "unexplained", "k0", "t", "unexplained_placed", "radius"):
        if getattr(res, name) is not None:
            getattr(res, name)[rows] = np.nan
    res.flags[rows] = 0
