"""``LandmarkMDS``: the fitted landmark map that places new objects.

scikit-learn's conventions without depending on it: parameters are stored by
``__init__`` untouched, ``fit`` validates and sets attributes ending in ``_``
and returns ``self``, methods used before ``fit`` raise ``NotFittedError``.
Every formula lives in ``streamembed.core``; this class only wires them.
"""

from __future__ import annotations

import logging
import os
from typing import Literal

import numpy as np
import scipy.spatial.distance

from .core import cailliez, geodesic, kernel_input, validation
from .core.block import solve_block
from .core.bounds import WindowBounds, window_bounds
from .core.centering import center_block, center_cross
from .core.cmds import LandmarkSpectrum, fit_spectrum
from .core.criteria import solve_l1, solve_stress
from .core.errors import InputError, NotFittedError
from .core.flags import FLAG_AMBIGUOUS, FLAG_BLOCK, FLAG_ESCAPED, FLAG_NON_EUCLIDEAN, FLAG_NOT_CONVERGED
from .core.metric_map import LANDMARK_MAPS, refine_map
from .core.projection import ProjectionKernel
from .core.residuals import block_k0, k0_diagonal, operator_norm
from .core.restricted import AMBIGUITY_RTOL, AMBIGUITY_RTOL_F32, restricted_arc, solve_restricted
from .core.result import EmbeddingResult

Method = Literal["projection", "restricted", "stress", "l1"]
METHODS = ("projection", "restricted", "stress", "l1")
#: Methods that need the classical-MDS map X = U Λ^{1/2} (kernel formulas, MATH.md §3);
#: a SMACOF/Sammon map places objects with the criteria only.
KERNEL_METHODS = ("projection", "restricted")
CRITERION_METHODS = ("stress", "l1")
INPUTS = ("dissimilarity", "similarity")
CORRECTIONS = ("none", "cailliez")

#: k0 below -K0_RTOL·(|β| + ‖ŷ_r‖²) counts as non-Euclidean (round-off of the
#: difference β - ‖ŷ_r‖² is far below this in float64; float32 inputs use the second).
K0_RTOL = {np.dtype(np.float64): 1e-7, np.dtype(np.float32): 1e-3}

logger = logging.getLogger("streamembed")


class LandmarkMDS:
    """Classical MDS of landmarks plus out-of-sample embedding of new objects.

    Args:
        n_components: d, the map's dimension.
        method: "projection" (Gower / Bengio / landmark MDS / Nyström, MATH.md §3),
            "restricted" (Trosset–Priebe restricted reconstruction), "stress"
            (raw stress Σ(‖y - x_i‖ - δ_i)², seed 000 end of §4) or "l1"
            (Σ|δ_i² - ‖y - x_i‖²|, seed 003), both from the projection start
            (``core.criteria``).
        n_residual_components: r, eigenpairs used for the exact k0 (MATH.md §4).
            None: every positive eigenvalue with the full eigensolver, else a
            documented truncation (``cmds.default_partial_rank``), which makes
            k0 an upper bound.
        eigensolver: "auto" (full LAPACK up to 1500 landmarks, ARPACK above),
            "full" or "partial".
        n_threads: threads for the projection hot path (default: up to 2).
        random_state: seed for the block solver's perturbed starts.
        input: "dissimilarity" (default) or "similarity": ``fit`` takes an (n, n)
            symmetric similarity (kernel) matrix and ``embed`` similarity rows
            (m, n) with ``self_similarity`` (m,) or as (m, n + 1) rows whose last
            column is k(z, z) (seed 000 §3; ``core.kernel_input``).
        geodesic_neighbors: None, or k: landmark Isomap (seed 001 §4, §6) on
            geodesic distances through the landmarks' k-nearest-neighbour graph
            (``core.geodesic``).
        correction: "none" (negative eigenvalues are dropped, seed 000 eq. 25) or
            "cailliez" (the additive constant that makes the landmark kernel PSD,
            seed 001 §4.2; ``core.cailliez``).
        landmark_map: "cmds" (classical MDS), or "smacof" / "sammon": the CMDS
            configuration refined by metric MDS (seed 001 §2.2–3;
            ``core.metric_map``); a refined map needs method "stress" or "l1".

    The input pipeline, in order: similarities -> dissimilarities ->
    geodesic distances -> + additive constant -> the landmark spectrum
    (β, k0 and the bounds are those of this corrected kernel) -> the map.

    Fitted attributes:
        embedding_ (n, d), eigenvalues_ (d,), spectrum_ (LandmarkSpectrum),
        negative_share_, n_landmarks_, landmark_ids_ (n,) str, model_version_,
        dissimilarities_ (n, n) or None, landmark_features_ (n, p) or None, metric_,
        alignment_rotation_ (d, d) and alignment_shift_ (d,): outputs are
        y·R + shift (identity unless ``set_alignment`` was called by a refit),
        landmark_self_similarity_ (n,) or None (input="similarity"),
        geodesic_distances_ (n, n) or None, additive_constant_ (float, 0 without
        correction), landmark_map_ (n, d) refined natural-frame map or None;
        for a refined map (None otherwise, and after ``load``): map_criterion_
        (its stress or Sammon criterion), map_iterations_ (Guttman sweeps),
        map_converged_ (False: the sweep budget ended before the tolerance was
        reached; ``fit`` then logs a WARNING), map_tolerance_.
    """

    def __init__(
        self,
        n_components: int = 2,
        method: Method = "projection",
        n_residual_components: int | None = None,
        eigensolver: str = "auto",
        n_threads: int | None = None,
        random_state: int = 0,
        input: str = "dissimilarity",
        geodesic_neighbors: int | None = None,
        correction: str = "none",
        landmark_map: str = "cmds",
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

    # ------------------------------------------------------------------ fit
    def fit(self, D: object, landmark_ids: object = None, y: object = None) -> "LandmarkMDS":
        """Fit the landmark map from D (n, n) dissimilarities (not squared).

        With ``input="similarity"``, D is an (n, n) symmetric similarity
        (kernel) matrix instead (seed 000 §3).
        """
        self._check_params()
        D_arr = np.asarray(D)
        input_dtype = D_arr.dtype if D_arr.dtype in (np.float32, np.float64) else np.dtype(np.float64)
        landmark_self = None
        if self.input == "similarity":
            K = kernel_input.check_similarity_matrix(D_arr, "K")
            D64 = kernel_input.landmark_dissimilarities(K)
            landmark_self = np.diagonal(K).copy()
        else:
            D64 = validation.check_dissimilarity_matrix(D_arr, "D")
        D_core, G, c = self._landmark_pipeline(D64)
        spectrum = fit_spectrum(D_core, self.n_residual_components, self.eigensolver, np.dtype(input_dtype), int(self.n_components))
        self._set_fitted(spectrum, D64 if landmark_self is None else None, landmark_ids, None, None)
        X_map = None
        if self.landmark_map != "cmds":
            ref = refine_map(self._natural_embedding(), D_core, self.landmark_map)
            X_map = ref.X
            self.map_criterion_, self.map_iterations_ = ref.criterion, ref.iterations
            self.map_converged_, self.map_tolerance_ = ref.converged, ref.tolerance
            if not ref.converged:
                logger.warning("landmark_map=%r: the refinement stopped at its budget of %d sweeps before the relative "
                               "criterion change fell to %g (criterion %.6g); the map is not converged",
                               self.landmark_map, ref.iterations, ref.tolerance, ref.criterion)
        return self._set_input_state(landmark_self, G, c, X_map)

    def _landmark_pipeline(self, D: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, float]:
        """Raw landmark dissimilarities -> (the ones the spectrum is built on, geodesics or None, constant)."""
        G = None
        if self.geodesic_neighbors is not None:
            G = geodesic.landmark_geodesics(D, int(self.geodesic_neighbors))
            D = G
        c = 0.0
        if self.correction == "cailliez":
            c = cailliez.additive_constant(D)
            if c > 0:
                D = cailliez.add_constant(D, c)
        return D, G, c

    def _set_input_state(self, landmark_self: np.ndarray | None, G: np.ndarray | None, c: float,
                         X_map: np.ndarray | None) -> "LandmarkMDS":
        """Install the input pipeline's fitted state and a refined map (fit and ``model_io.load_model``)."""
        n = self.n_landmarks_
        d = int(self.n_components)
        if landmark_self is not None and np.shape(landmark_self) != (n,):
            raise InputError(f"landmark_self_similarity must have shape ({n},), got {np.shape(landmark_self)}")
        if G is not None and np.shape(G) != (n, n):
            raise InputError(f"geodesic_distances must have shape ({n}, {n}), got {np.shape(G)}")
        if X_map is not None and np.shape(X_map) != (n, d):
            raise InputError(f"landmark_map must have shape ({n}, {d}), got {np.shape(X_map)}")
        if (self.input == "similarity") != (landmark_self is not None):
            raise InputError("input='similarity' models need the landmark self-similarities (and only they have them)")
        if (self.geodesic_neighbors is not None) != (G is not None):
            raise InputError("geodesic_neighbors models need the landmark geodesic distances (and only they have them)")
        if (self.landmark_map != "cmds") != (X_map is not None):
            raise InputError(f"landmark_map={self.landmark_map!r} needs a refined landmark configuration")
        self.landmark_self_similarity_ = None if landmark_self is None else np.asarray(landmark_self, dtype=np.float64)
        self.geodesic_distances_ = None if G is None else np.asarray(G, dtype=np.float64)
        self.additive_constant_ = float(c)
        self.landmark_map_ = None if X_map is None else np.asarray(X_map, dtype=np.float64)
        self._map_start = None
        self.embedding_ = self._natural_embedding() @ self.alignment_rotation_ + self.alignment_shift_
        return self

    def _natural_embedding(self) -> np.ndarray:
        """The landmark configuration (n, d) in the model's own frame: U_d Λ_d^{1/2}, or the refined map."""
        X_map = getattr(self, "landmark_map_", None)
        if X_map is not None:
            return X_map
        return self.spectrum_.eigenvectors[:, : int(self.n_components)] * np.sqrt(self.eigenvalues_)

    def _transforms_input(self) -> bool:
        return (self.landmark_self_similarity_ is not None or self.geodesic_distances_ is not None
                or self.additive_constant_ > 0)

    @property
    def input_width_(self) -> int:
        """Columns of an input row: n dissimilarities, or n similarities + k(z, z) for input="similarity"."""
        self._check_fitted()
        return self.n_landmarks_ + (1 if self.landmark_self_similarity_ is not None else 0)

    def fit_features(self, X: object, metric: str = "euclidean", landmark_ids: object = None) -> "LandmarkMDS":
        """Fit from landmark feature vectors X (n, p); distances by ``scipy.spatial.distance.cdist``.

        With ``input="similarity"``, ``metric`` names a kernel of
        ``core.kernel_input.FEATURE_KERNELS`` ("linear", "cosine", "rbf") instead.
        """
        X64 = validation.as_float_array(X, "X", 2).astype(np.float64)
        if not np.isfinite(X64).all():
            idx = np.argwhere(~np.isfinite(X64))[0]
            raise InputError(f"X has a non-finite entry: X[{idx[0]}, {idx[1]}] = {X64[tuple(idx)]}")
        if self.input == "similarity":
            if metric not in kernel_input.FEATURE_KERNELS:
                raise InputError(f"with input='similarity' the metric names a kernel, one of "
                                 f"{kernel_input.FEATURE_KERNELS}; got {metric!r}")
            self.fit(kernel_input.feature_kernel(X64, X64, metric), landmark_ids)
        else:
            try:
                D = scipy.spatial.distance.squareform(scipy.spatial.distance.pdist(X64, metric=metric))
            except ValueError as exc:
                raise InputError(f"metric {metric!r} failed on X of shape {X64.shape}: {exc}") from exc
            self.fit(D, landmark_ids)
        self.landmark_features_ = X64
        self.metric_ = metric
        return self

    def _check_params(self) -> None:
        if self.method not in METHODS:
            raise InputError(f"method must be one of {METHODS}, got {self.method!r}")
        if not isinstance(self.n_components, (int, np.integer)) or self.n_components < 1:
            raise InputError(f"n_components must be a positive integer, got {self.n_components!r}")
        if self.input not in INPUTS:
            raise InputError(f"input must be one of {INPUTS}, got {self.input!r}")
        k = self.geodesic_neighbors
        if k is not None and (not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1):
            raise InputError(f"geodesic_neighbors must be None or a positive integer, got {k!r}")
        if self.correction not in CORRECTIONS:
            raise InputError(f"correction must be one of {CORRECTIONS}, got {self.correction!r}")
        if self.landmark_map not in LANDMARK_MAPS:
            raise InputError(f"landmark_map must be one of {LANDMARK_MAPS}, got {self.landmark_map!r}")
        self._check_method(self.method)

    def _check_method(self, method: str, block: bool = False) -> None:
        """Refuse a method the map cannot use (a refined map has no kernel projection)."""
        if method not in METHODS:
            raise InputError(f"method must be one of {METHODS}, got {method!r}")
        if self.landmark_map != "cmds" and (method in KERNEL_METHODS or block):
            what = "block restricted reconstruction" if block else f"method={method!r}"
            raise InputError(
                f"{what} needs the classical-MDS map; landmark_map={self.landmark_map!r} places objects with "
                f"method 'stress' (restricted reconstruction for a stress-built map, seed 000 §4) or 'l1'"
            )

    def _set_fitted(
        self,
        spectrum: LandmarkSpectrum,
        D: np.ndarray | None,
        landmark_ids: object,
        features: np.ndarray | None,
        metric: str | None,
        model_version: int = 1,
    ) -> "LandmarkMDS":
        d = int(self.n_components)
        n = spectrum.n_landmarks
        if d > spectrum.rank:
            raise InputError(
                f"n_components={d} exceeds the {spectrum.rank} positive eigenvalues of the landmark kernel "
                f"(n = {n} landmarks)"
            )
        if landmark_ids is None:
            ids = np.array([f"L{i}" for i in range(n)])
        else:
            ids = np.asarray([str(x) for x in landmark_ids])
            if ids.shape != (n,):
                raise InputError(f"landmark_ids must have {n} entries, got shape {ids.shape}")
            if len(set(ids.tolist())) != n:
                raise InputError("landmark_ids must be unique")
        self.spectrum_ = spectrum
        self.eigenvalues_ = spectrum.eigenvalues[:d].copy()
        self.alignment_rotation_ = np.eye(d)
        self.alignment_shift_ = np.zeros(d)
        self.embedding_ = spectrum.eigenvectors[:, :d] * np.sqrt(self.eigenvalues_)
        self.negative_share_ = spectrum.negative_share
        self.n_landmarks_ = n
        self.landmark_ids_ = ids
        self.model_version_ = int(model_version)
        self.dissimilarities_ = D
        self.landmark_features_ = features
        self.metric_ = metric
        self._kernels: dict[tuple[int, str], ProjectionKernel] = {}
        # the input pipeline's state: plain dissimilarities until _set_input_state
        self.landmark_self_similarity_ = None
        self.geodesic_distances_ = None
        self.additive_constant_ = 0.0
        self.landmark_map_ = None
        self._map_start = None
        self.map_criterion_ = self.map_iterations_ = self.map_converged_ = self.map_tolerance_ = None
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "spectrum_"):
            raise NotFittedError("this LandmarkMDS is not fitted yet: call fit(D) or load a saved model")

    def _kernel(self, n_coords: int, dtype: np.dtype) -> ProjectionKernel:
        key = (n_coords, np.dtype(dtype).str)
        if not hasattr(self, "_kernels"):
            self._kernels = {}
        k = self._kernels.get(key)
        if k is None:
            k = ProjectionKernel(self.spectrum_, n_coords, np.dtype(dtype), self.n_threads)
            self._kernels[key] = k
        return k

    # -------------------------------------------------------------- embedding
    def transform(self, A: object) -> np.ndarray:
        """Embed m objects from A (m, n) dissimilarities to the landmarks -> (m, d)."""
        return self.embed(A).y

    def transform_block(self, A: object, C: object) -> np.ndarray:
        """Multi-point RR of a block: A (m, n), C (m, m) mutual dissimilarities -> (m, d)."""
        return self.embed(A, C).y

    def embed(
        self,
        A: object,
        C: object = None,
        *,
        method: Method | None = None,
        k0_rows: None | Literal["all"] | int = None,
        errors: Literal["raise", "mask"] = "raise",
        self_similarity: object = None,
    ) -> EmbeddingResult:
        """Embed a batch and report how much to trust each placement.

        Args:
            A: (m, n) dissimilarities (not squared) to the landmarks, float32 or
               float64 (the hot path runs in that precision). For an
               input="similarity" model: (m, n) similarities to the landmarks, or
               (m, n + 1) with the self-similarity k(z, z) as the last column.
            C: (m, m) mutual dissimilarities (similarities for input="similarity",
               whose diagonal then gives k(z, z)): the batch is one block (multi-point RR).
            method: overrides the estimator's method for this call.
            k0_rows: exact k0 for None (no rows), "all", or an int s (s evenly
               spaced rows: a deterministic sample).
            errors: "raise" (InputError on the first bad row) or "mask" (bad rows
               get valid=False, a reason and NaN numbers).
            self_similarity: (m,) k(z, z) for input="similarity" with (m, n) rows.
               Projection does not need it (β, unexplained and k0 are then NaN);
               every other method does (seed 000 §3, ``core.kernel_input``).
        """
        res = self._embed_natural(A, C, method=method, k0_rows=k0_rows, errors=errors, self_similarity=self_similarity)
        self._to_frame(res)
        return res

    def set_alignment(self, rotation: np.ndarray, shift: np.ndarray) -> "LandmarkMDS":
        """Map every output into another frame: y ↦ y·R + shift (MATH.md §5).

        A refitted model is aligned to its predecessor's frame by orthogonal
        Procrustes so that downstream coordinates stay comparable; the
        alignment applies to ``embedding_`` and to every embedded object.

        Args:
            rotation: (d, d) orthogonal matrix R (rotation or reflection).
            shift: (d,) translation, in distance units.
        """
        self._check_fitted()
        d = int(self.n_components)
        R = np.asarray(rotation, dtype=np.float64)
        t = np.asarray(shift, dtype=np.float64)
        if R.shape != (d, d) or t.shape != (d,):
            raise InputError(f"alignment needs rotation ({d}, {d}) and shift ({d},), got {R.shape} and {t.shape}")
        if not np.allclose(R.T @ R, np.eye(d), atol=1e-8):
            raise InputError("alignment rotation must be orthogonal (RᵀR = I)")
        self.alignment_rotation_, self.alignment_shift_ = R, t
        self.embedding_ = self._natural_embedding() @ R + t
        return self

    def _is_aligned(self) -> bool:
        return not (np.array_equal(self.alignment_rotation_, np.eye(self.alignment_rotation_.shape[0])) and not self.alignment_shift_.any())

    def _to_frame(self, res: EmbeddingResult) -> None:
        if self._is_aligned():
            res.y = res.y @ self.alignment_rotation_ + self.alignment_shift_

    def _embed_natural(self, A: object, C: object = None, *, method: Method | None = None, k0_rows=None,
                       errors: str = "raise", self_similarity: object = None) -> EmbeddingResult:
        """``embed`` in the model's own eigenbasis frame (before any alignment)."""
        self._check_fitted()
        method = self.method if method is None else method
        self._check_method(method, block=C is not None)
        if errors not in ("raise", "mask"):
            raise InputError(f"errors must be 'raise' or 'mask', got {errors!r}")
        if self_similarity is not None and self.landmark_self_similarity_ is None:
            raise InputError("self_similarity is only for input='similarity' models")
        if self._transforms_input():
            return self._embed_transformed(A, C, self_similarity, method, k0_rows, errors)
        A_arr = validation.check_rows(A, self.n_landmarks_, "A")
        if C is not None:
            return self._embed_block(A_arr, C, k0_rows, errors)
        return self._embed_rows(A_arr, None, None, method, k0_rows, errors)

    def _embed_rows(self, A_arr: np.ndarray, valid: np.ndarray | None, reasons: list[str | None] | None,
                    method: str, k0_rows: object, errors: str) -> EmbeddingResult:
        """Single objects from dissimilarities A_arr (m, n) the spectrum is built on."""
        d = int(self.n_components)
        kernel = self._kernel(d, A_arr.dtype)
        Z, suspect = kernel(A_arr)
        m = A_arr.shape[0]
        valid = np.ones(m, dtype=bool) if valid is None else valid
        reasons = [None] * m if reasons is None else reasons
        for i in np.flatnonzero(suspect & valid):
            why = validation.describe_bad_row(A_arr[i], "A")
            if why is not None:
                if errors == "raise":
                    raise InputError(f"row {i} of A is invalid: {why}")
                valid[i], reasons[i] = False, why
        with np.errstate(invalid="ignore", over="ignore"):
            return self._finish_embed(A_arr, Z, valid, reasons, method, k0_rows)

    # ------------------------------------------------------- input pipeline
    def _embed_transformed(self, A: object, C: object, kappa: object, method: str, k0_rows: object,
                           errors: str) -> EmbeddingResult:
        """Embed raw input through similarities -> geodesics -> additive constant (class docstring)."""
        A_raw = validation.as_float_array(A, "A", 2)
        m = A_raw.shape[0]
        if C is not None:
            if kappa is not None:
                raise InputError("with a block, k(z, z) comes from the diagonal of C: do not pass self_similarity")
            try:
                A_core, C_core = self._core_block(A_raw, C)
            except InputError as exc:
                if errors == "raise":
                    raise
                res = _empty_result(m, int(self.n_components), "block")
                res.valid[:] = False
                res.reasons = [f"bad_block: {exc}"] * m
                return res
            return self._embed_block(A_core, C_core, k0_rows, errors)
        A_core, valid, reasons, known = self._core_rows(A_raw, kappa, errors)
        if not known.all() and method != "projection":
            raise InputError(f"method={method!r} needs the self-similarity k(z, z): pass self_similarity (m,) "
                             f"or rows of {self.n_landmarks_ + 1} columns (seed 000 §3)")
        res = self._embed_rows(A_core, valid, reasons, method, k0_rows, errors)
        if not known.all():  # β is unknown: the projection is exact, its residuals are not
            for name in ("beta", "unexplained", "k0"):
                getattr(res, name)[~known] = np.nan
            res.flags[~known] &= ~FLAG_NON_EUCLIDEAN
        return res

    def _split_similarity_rows(self, A_raw: np.ndarray, kappa: object) -> tuple[np.ndarray, np.ndarray | None]:
        """(similarities (m, n), self-similarities (m,) or None) from (m, n) rows + kappa or (m, n + 1) rows."""
        n, m = self.n_landmarks_, A_raw.shape[0]
        if A_raw.shape[1] == n + 1:
            if kappa is not None:
                raise InputError(f"A has {n + 1} columns (its last is k(z, z)): do not also pass self_similarity")
            return A_raw[:, :n], A_raw[:, n].astype(np.float64)
        if A_raw.shape[1] != n:
            raise InputError(f"A has {A_raw.shape[1]} columns but the model has {n} landmarks "
                             f"(shape {A_raw.shape}, expected (m, {n}) or (m, {n + 1}) with k(z, z) last)")
        if kappa is None:
            return A_raw, None
        k = np.asarray(kappa, dtype=np.float64).reshape(-1)
        if k.shape != (m,):
            raise InputError(f"self_similarity must have shape ({m},) to match A's {m} rows, got {np.shape(kappa)}")
        return A_raw, k

    def _core_rows(self, A_raw: np.ndarray, kappa: object, errors: str) -> tuple[np.ndarray, np.ndarray, list[str | None], np.ndarray]:
        """Raw rows -> (dissimilarities the spectrum is built on (m, n), valid, reasons, κ known).

        Invalid rows are zeroed (they are blanked after embedding); with
        errors="raise" the first one raises.
        """
        n, m = self.n_landmarks_, A_raw.shape[0]
        valid = np.ones(m, dtype=bool)
        reasons: list[str | None] = [None] * m
        known = np.ones(m, dtype=bool)
        if self.landmark_self_similarity_ is not None:
            K_rows, k = self._split_similarity_rows(A_raw, kappa)
            finite = np.isfinite(K_rows).all(axis=1) & (np.isfinite(k) if k is not None else True)
            for i in np.flatnonzero(~finite):
                bad = np.flatnonzero(~np.isfinite(K_rows[i]))
                reasons[int(i)] = (f"non_finite: similarity A[{bad[0]}] = {K_rows[i, bad[0]]}" if bad.size
                                   else f"non_finite: self-similarity = {k[i]}")
                valid[i] = False
            if not finite.all():
                K_rows = np.where(finite[:, None], K_rows, 0).astype(K_rows.dtype)
                k = None if k is None else np.where(finite, k, 0.0)
            A, known, neg = kernel_input.row_dissimilarities(K_rows, self.landmark_self_similarity_, k)
            for i, why in enumerate(neg):
                if why is not None and valid[i]:
                    valid[i], reasons[i] = False, why
        else:
            A = validation.check_rows(A_raw, n, "A")
            for i, why in enumerate(validation.row_problems(A, "A")):
                if why is not None:
                    valid[i], reasons[i] = False, why
            if not valid.all():
                A = np.where(valid[:, None], A, 0).astype(A.dtype)
        if errors == "raise" and not valid.all():
            i = int(np.argmin(valid))
            raise InputError(f"row {i} of A is invalid: {reasons[i]}")
        dtype = A.dtype
        if self.geodesic_distances_ is not None:
            A = geodesic.object_geodesics(A, self.geodesic_distances_, int(self.geodesic_neighbors))
        if self.additive_constant_ > 0:
            A = A + self.additive_constant_
        return np.ascontiguousarray(A, dtype=dtype), valid, reasons, known

    def _core_block(self, A_raw: np.ndarray, C: object) -> tuple[np.ndarray, np.ndarray]:
        """Raw block (rows, mutual) -> the (k, n) and (k, k) dissimilarities the spectrum is built on.

        Raises InputError for any bad member or a bad mutual matrix.
        """
        n, m = self.n_landmarks_, A_raw.shape[0]
        if self.landmark_self_similarity_ is not None:
            K_rows, _ = self._split_similarity_rows(A_raw, None)
            Cs = validation.as_float_array(C, "C", 2).astype(np.float64)
            if Cs.shape != (m, m):
                raise InputError(f"C must have shape ({m}, {m}) to match A's {m} rows, got {Cs.shape}")
            Cs = kernel_input.check_similarity_matrix(Cs, "C") if m > 1 else Cs
            if not np.isfinite(K_rows).all() or not np.isfinite(Cs).all():
                raise InputError("the block has a non-finite similarity")
            A, _, neg = kernel_input.row_dissimilarities(K_rows.astype(np.float64), self.landmark_self_similarity_,
                                                          np.diagonal(Cs).copy())
            bad = [why for why in neg if why is not None]
            if bad:
                raise InputError(bad[0])
            C64 = kernel_input.block_dissimilarities(Cs) if m > 1 else np.zeros((1, 1))
        else:
            A = validation.check_rows(A_raw, n, "A").astype(np.float64)
            for i, why in enumerate(validation.row_problems(A, "A")):
                if why is not None:
                    raise InputError(f"row {i} of A is invalid: {why}")
            C64 = validation.check_cross(C, m)
        if self.geodesic_distances_ is not None:
            A_geo = geodesic.object_geodesics(A, self.geodesic_distances_, int(self.geodesic_neighbors))
            C64 = geodesic.block_geodesics(A, A_geo, int(self.geodesic_neighbors))
            A = A_geo
        if self.additive_constant_ > 0:
            A = A + self.additive_constant_
            C64 = cailliez.add_constant(C64, self.additive_constant_)
        return A, C64

    def core_dissimilarities(self, A: object, C: object = None, self_similarity: object = None) -> tuple[np.ndarray, np.ndarray | None]:
        """The dissimilarities the landmark spectrum is built on, for raw model input.

        Applies the input pipeline (similarities -> geodesics -> additive
        constant; identity for a plain model) to A (m, n) [or (m, n + 1)] and
        the block's C (m, m). Raises InputError on any invalid row.

        Returns: (A (m, n) float64, C (m, m) float64 or None).
        """
        self._check_fitted()
        A_raw = validation.as_float_array(A, "A", 2)
        if C is not None:
            if not self._transforms_input():
                A64 = validation.check_rows(A_raw, self.n_landmarks_, "A").astype(np.float64)
                return A64, validation.check_cross(C, A64.shape[0])
            return self._core_block(A_raw, C)
        if not self._transforms_input():
            return validation.check_rows(A_raw, self.n_landmarks_, "A").astype(np.float64), None
        A_core, _, _, known = self._core_rows(A_raw, self_similarity, "raise")
        if not known.all():
            raise InputError("the self-similarity k(z, z) is needed: pass self_similarity or (m, n + 1) rows")
        return A_core.astype(np.float64), None

    def _finish_embed(self, A_arr, Z, valid, reasons, method, k0_rows) -> EmbeddingResult:
        d = int(self.n_components)
        m = A_arr.shape[0]
        y = Z[:, :d].astype(np.float64)
        beta = Z[:, d].astype(np.float64)
        flags = np.zeros(m, dtype=np.uint32)
        t = np.full(m, np.nan)
        unexpl = beta - np.einsum("ij,ij->i", y, y)
        if method == "restricted":
            c = y * np.sqrt(self.eigenvalues_)
            rtol = self._ambiguity_rtol(A_arr.dtype)
            if valid.all():
                sol = solve_restricted(c, beta, self.eigenvalues_, rtol)
                y, t, flags = sol.y, sol.t, sol.flags
            else:
                rows = np.flatnonzero(valid)
                sol = solve_restricted(c[rows], beta[rows], self.eigenvalues_, rtol)
                y[rows], t[rows], flags[rows] = sol.y, sol.t, sol.flags
        elif method in CRITERION_METHODS:
            rows = np.flatnonzero(valid)
            if rows.size:
                X = self._natural_embedding()
                y0 = y[rows] if self.landmark_map_ is None else self._map_projection(A_arr[rows])
                delta = A_arr[rows].astype(np.float64)
                sol = solve_stress(y0, X, delta) if method == "stress" else solve_l1(y0, X, np.square(delta))
                y[rows] = sol.y
                flags[rows[~sol.converged]] |= FLAG_NOT_CONVERGED
                flags[rows[sol.escaped]] |= FLAG_ESCAPED
                flags[rows[sol.ambiguous]] |= FLAG_AMBIGUOUS
        k0 = np.full(m, np.nan)
        sample = self._k0_sample(k0_rows, np.flatnonzero(valid))
        if sample.size:
            k0[sample] = self._exact_k0(A_arr[sample])
            flags[sample] |= self._non_euclidean(k0[sample], beta[sample], A_arr.dtype)
        flags[(beta < 0) & valid] |= FLAG_NON_EUCLIDEAN
        res = EmbeddingResult(y=y, beta=beta, unexplained=unexpl, k0=k0, t=t, flags=flags, valid=valid, reasons=reasons, method=method)
        if not valid.all():
            _blank(res, ~valid)
        return res

    def _map_projection(self, A_rows: np.ndarray) -> np.ndarray:
        """Least-squares start on a refined map: y0 = (XᵀX)⁻¹ Xᵀ b (m, d) (MATH.md §3 with X the map).

        X is centred, so b's constant terms vanish: y0 = -½ (a2 - m_Δ) X (XᵀX)⁻¹.
        For the CMDS map this is the projection ŷ.
        """
        if self._map_start is None:
            X = self.landmark_map_
            self._map_start = X @ np.linalg.inv(X.T @ X)
        a2 = np.square(A_rows.astype(np.float64))
        return -0.5 * (a2 - self.spectrum_.row_means) @ self._map_start

    def _ambiguity_rtol(self, dtype: np.dtype) -> float:
        return AMBIGUITY_RTOL_F32 if np.dtype(dtype) == np.float32 else AMBIGUITY_RTOL

    def _k0_sample(self, k0_rows: None | str | int, valid_rows: np.ndarray) -> np.ndarray:
        if k0_rows is None or valid_rows.size == 0:
            return np.empty(0, dtype=np.int64)
        if isinstance(k0_rows, str):
            if k0_rows != "all":
                raise InputError(f"k0_rows must be None, 'all' or an int, got {k0_rows!r}")
            return valid_rows
        s = int(k0_rows)
        if s < 0:
            raise InputError(f"k0_rows must be non-negative, got {s}")
        if s >= valid_rows.size:
            return valid_rows
        return valid_rows[np.linspace(0, valid_rows.size - 1, s).round().astype(np.int64)] if s else valid_rows[:0]

    def residual_projection(self, A: object, self_similarity: object = None) -> tuple[np.ndarray, np.ndarray]:
        """(ŷ_r (m, r), β (m,)): projections on every monitored eigenpair, float64.

        In the model's own eigenbasis (not aligned); k0 = β - ‖ŷ_r‖² (MATH.md §4).
        Input rows (raw model input, as for ``embed``) must already be valid.
        """
        self._check_fitted()
        if self._transforms_input():
            return self._project_r(self.core_dissimilarities(A, None, self_similarity)[0])
        return self._project_r(validation.check_rows(A, self.n_landmarks_, "A"))

    def block_residual(self, A: object, C: object) -> np.ndarray:
        """K0 = β - Ŷ_r Ŷ_rᵀ (m, m) of a block from raw input A and its mutual C (MATH.md §4)."""
        A64, C64 = self.core_dissimilarities(A, C)
        _, Beta = center_block(np.square(A64), np.square(C64), self.spectrum_.row_means, self.spectrum_.grand_mean)
        return block_k0(Beta, self._project_r(A64)[0])

    def _project_r(self, A_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ŷ_r (s, r), β (s,)) in float64 with every monitored eigenpair."""
        r = self.spectrum_.rank
        Z, _ = self._kernel(r, np.dtype(np.float64))(np.ascontiguousarray(A_rows, dtype=np.float64))
        return Z[:, :r], Z[:, r]

    def _exact_k0(self, A_rows: np.ndarray) -> np.ndarray:
        y_r, beta = self._project_r(A_rows)
        return k0_diagonal(beta, y_r)

    def _non_euclidean(self, k0: np.ndarray, beta: np.ndarray, dtype: np.dtype) -> np.ndarray:
        tol = K0_RTOL.get(np.dtype(dtype), 1e-7) * (np.abs(beta) + np.abs(beta - k0))
        return np.where(k0 < -tol, FLAG_NON_EUCLIDEAN, 0).astype(np.uint32)

    def _embed_block(self, A: np.ndarray, C: object, k0_rows: object, errors: str) -> EmbeddingResult:
        m = A.shape[0]
        d = int(self.n_components)
        problem: str | None = None
        try:
            C64 = validation.check_cross(C, m)
        except InputError as exc:
            if errors == "raise":
                raise
            problem = f"bad_block: {exc}"
        row_reasons = validation.row_problems(A, "A")
        if problem is None:
            bad = [(i, r) for i, r in enumerate(row_reasons) if r is not None]
            if bad:
                if errors == "raise":
                    raise InputError(f"row {bad[0][0]} of A is invalid: {bad[0][1]}")
                problem = f"bad_block: member {bad[0][0]} is invalid ({bad[0][1]})"
        if problem is not None:
            res = _empty_result(m, d, "block")
            res.valid[:] = False
            res.reasons = [row_reasons[i] or problem for i in range(m)]
            return res
        A64 = A.astype(np.float64)
        B, Beta = center_block(np.square(A64), np.square(C64), self.spectrum_.row_means, self.spectrum_.grand_mean)
        U = self.spectrum_.eigenvectors[:, :d]
        Cc = B @ U
        sol = solve_block(Cc, Beta, self.eigenvalues_, float(np.square(B).sum()), random_state=self.random_state)
        beta = np.diagonal(Beta).copy()
        y_proj = Cc / np.sqrt(self.eigenvalues_)
        flags = np.full(m, FLAG_BLOCK, dtype=np.uint32)
        k0 = np.full(m, np.nan)
        norm = None
        if k0_rows is not None:
            y_r, _ = self._project_r(A64)
            K0 = block_k0(Beta, y_r)
            k0 = np.diagonal(K0).copy()
            norm = operator_norm(K0)
            flags |= self._non_euclidean(k0, beta, A.dtype)
        flags[beta < 0] |= FLAG_NON_EUCLIDEAN
        return EmbeddingResult(
            y=sol.y,
            beta=beta,
            unexplained=beta - np.einsum("ij,ij->i", y_proj, y_proj),
            k0=k0,
            t=np.full(m, np.nan),
            flags=flags,
            valid=np.ones(m, dtype=bool),
            reasons=[None] * m,
            method="block",
            objective=sol.objective,
            block_norm_k0=norm,
        )

    # -------------------------------------------------------------- residuals
    def residuals(self, A: object, C: object = None, k0_rows: None | Literal["all"] | int = "all", n_window: int | None = None,
                  self_similarity: object = None) -> tuple[EmbeddingResult, WindowBounds]:
        """Per-object residuals (β, unexplained, exact k0) and the window bounds.

        The window is the batch A (or the block A with C, which makes ‖k0‖₂ and
        the kernel-distance error exact); with ``k0_rows`` an int, Tr(k0) and the
        Nyström spectrum are estimated from that sample (MATH.md §4). A is raw
        model input (as for ``embed``); the residuals are those of the corrected
        landmark kernel. The result's ``y`` is the projection (NaN for a
        SMACOF/Sammon map, which has no projection).
        """
        self._check_fitted()
        if self._transforms_input():
            A_arr = self.core_dissimilarities(A, None, self_similarity)[0]
        else:
            A_arr = validation.check_rows(A, self.n_landmarks_, "A")
        res = self._embed_rows(A_arr, None, None, "projection", k0_rows, "raise")
        if self.landmark_map_ is not None:
            res.y[:] = np.nan
        self._to_frame(res)
        sample = np.flatnonzero(~np.isnan(res.k0))
        y_r, _ = self._project_r(A_arr[sample])
        K0 = None if C is None else self.block_residual(A, C)
        bounds = window_bounds(
            res.k0[sample],
            y_r,
            self.spectrum_.eigenvalues,
            int(self.n_components),
            self.n_landmarks_,
            n_window=A_arr.shape[0] if n_window is None else n_window,
            K0=K0,
            negative_tol=0.0,
            beta=res.beta[sample],
        )
        return res, bounds

    def arc(self, A: object, s: float) -> np.ndarray:
        """The point at fraction s ∈ [0, 1] of the arc from projection (0) to RR (1), (m, d)."""
        res = self._embed_natural(A, method="restricted")
        if s != 1.0:
            y_proj = self._embed_natural(A, method="projection").y
            res.y = restricted_arc(y_proj * np.sqrt(self.eigenvalues_), self.eigenvalues_, res.t, s)
        self._to_frame(res)
        return res.y

    # ---------------------------------------------------------- feature mode
    def dissimilarities_to_landmarks(self, F: object) -> np.ndarray:
        """Feature mode: the model's input rows for feature rows F (m, p).

        Dissimilarities (m, n) to the landmarks; for an input="similarity"
        model, kernel similarities with the self-similarity appended, (m, n + 1),
        the row format ``embed`` accepts.
        """
        self._check_fitted()
        if self.landmark_features_ is None:
            raise InputError("this model was not fitted from features (use fit_features)")
        F64 = validation.as_float_array(F, "features", 2).astype(np.float64)
        p = self.landmark_features_.shape[1]
        if F64.shape[1] != p:
            raise InputError(f"features have {F64.shape[1]} columns, the landmarks have {p} (shape {F64.shape})")
        if self.landmark_self_similarity_ is not None:
            K = kernel_input.feature_kernel(F64, self.landmark_features_, self.metric_)
            return np.hstack([K, kernel_input.feature_self_similarity(F64, self.metric_)[:, None]])
        return scipy.spatial.distance.cdist(F64, self.landmark_features_, metric=self.metric_)

    # ----------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write the fitted model to a portable ``.npz`` (no pickle; see ``model_io``)."""
        from .model_io import save_model

        self._check_fitted()
        save_model(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LandmarkMDS":
        """Read a model written by ``save``; raises ``ModelFileError`` on a bad file."""
        from .model_io import load_model

        return load_model(path)

    def get_params(self) -> dict:
        return {
            "n_components": self.n_components,
            "method": self.method,
            "n_residual_components": self.n_residual_components,
            "eigensolver": self.eigensolver,
            "n_threads": self.n_threads,
            "random_state": self.random_state,
            "input": self.input,
            "geodesic_neighbors": None if self.geodesic_neighbors is None else int(self.geodesic_neighbors),
            "correction": self.correction,
            "landmark_map": self.landmark_map,
        }

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"LandmarkMDS({params})"


def _empty_result(m: int, d: int, method: str) -> EmbeddingResult:
    nan = np.full(m, np.nan)
    return EmbeddingResult(
        y=np.full((m, d), np.nan),
        beta=nan.copy(),
        unexplained=nan.copy(),
        k0=nan.copy(),
        t=nan.copy(),
        flags=np.zeros(m, dtype=np.uint32),
        valid=np.ones(m, dtype=bool),
        reasons=[None] * m,
        method=method,
    )


def _blank(res: EmbeddingResult, rows: np.ndarray) -> None:
    res.y = res.y.copy()
    res.y[rows] = np.nan
    for name in ("beta", "unexplained", "k0", "t"):
        getattr(res, name)[rows] = np.nan
    res.flags[rows] = 0
