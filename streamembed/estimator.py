"""``LandmarkMDS``: the fitted landmark map that places new objects.

scikit-learn's conventions without depending on it: parameters are stored by
``__init__`` untouched, ``fit`` validates and sets attributes ending in ``_``
and returns ``self``, methods used before ``fit`` raise ``NotFittedError``.
Every formula lives in ``streamembed.core``; this class only wires them.
"""

from __future__ import annotations

import os
from typing import Literal

import numpy as np
import scipy.spatial.distance

from .core import validation
from .core.block import solve_block
from .core.bounds import WindowBounds, window_bounds
from .core.centering import center_block, center_cross
from .core.cmds import LandmarkSpectrum, fit_spectrum
from .core.errors import InputError, NotFittedError
from .core.flags import FLAG_BLOCK, FLAG_NON_EUCLIDEAN
from .core.projection import ProjectionKernel
from .core.residuals import block_k0, k0_diagonal, operator_norm
from .core.restricted import AMBIGUITY_RTOL, AMBIGUITY_RTOL_F32, restricted_arc, solve_restricted
from .core.result import EmbeddingResult

Method = Literal["projection", "restricted"]
METHODS = ("projection", "restricted")

#: k0 below -K0_RTOL·(|β| + ‖ŷ_r‖²) counts as non-Euclidean (round-off of the
#: difference β - ‖ŷ_r‖² is far below this in float64; float32 inputs use the second).
K0_RTOL = {np.dtype(np.float64): 1e-7, np.dtype(np.float32): 1e-3}


class LandmarkMDS:
    """Classical MDS of landmarks plus out-of-sample embedding of new objects.

    Args:
        n_components: d, the map's dimension.
        method: "projection" (Gower / Bengio / landmark MDS / Nyström, MATH.md §3)
            or "restricted" (Trosset–Priebe restricted reconstruction).
        n_residual_components: r, eigenpairs used for the exact k0 (MATH.md §4).
            None: every positive eigenvalue with the full eigensolver, else a
            documented truncation (``cmds.default_partial_rank``), which makes
            k0 an upper bound.
        eigensolver: "auto" (full LAPACK up to 1500 landmarks, ARPACK above),
            "full" or "partial".
        n_threads: threads for the projection hot path (default: up to 2).
        random_state: seed for the block solver's perturbed starts.

    Fitted attributes:
        embedding_ (n, d), eigenvalues_ (d,), spectrum_ (LandmarkSpectrum),
        negative_share_, n_landmarks_, landmark_ids_ (n,) str, model_version_,
        dissimilarities_ (n, n) or None, landmark_features_ (n, p) or None, metric_,
        alignment_rotation_ (d, d) and alignment_shift_ (d,): outputs are
        y·R + shift (identity unless ``set_alignment`` was called by a refit).
    """

    def __init__(
        self,
        n_components: int = 2,
        method: Method = "projection",
        n_residual_components: int | None = None,
        eigensolver: str = "auto",
        n_threads: int | None = None,
        random_state: int = 0,
    ):
        self.n_components = n_components
        self.method = method
        self.n_residual_components = n_residual_components
        self.eigensolver = eigensolver
        self.n_threads = n_threads
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def fit(self, D: object, landmark_ids: object = None, y: object = None) -> "LandmarkMDS":
        """Fit the landmark map from D (n, n) dissimilarities (not squared)."""
        self._check_params()
        D_arr = np.asarray(D)
        input_dtype = D_arr.dtype if D_arr.dtype in (np.float32, np.float64) else np.dtype(np.float64)
        D64 = validation.check_dissimilarity_matrix(D_arr, "D")
        spectrum = fit_spectrum(D64, self.n_residual_components, self.eigensolver, np.dtype(input_dtype), int(self.n_components))
        return self._set_fitted(spectrum, D64, landmark_ids, None, None)

    def fit_features(self, X: object, metric: str = "euclidean", landmark_ids: object = None) -> "LandmarkMDS":
        """Fit from landmark feature vectors X (n, p); distances by ``scipy.spatial.distance.cdist``."""
        X64 = validation.as_float_array(X, "X", 2).astype(np.float64)
        if not np.isfinite(X64).all():
            idx = np.argwhere(~np.isfinite(X64))[0]
            raise InputError(f"X has a non-finite entry: X[{idx[0]}, {idx[1]}] = {X64[tuple(idx)]}")
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
    ) -> EmbeddingResult:
        """Embed a batch and report how much to trust each placement.

        Args:
            A: (m, n) dissimilarities (not squared) to the landmarks, float32 or
               float64 (the hot path runs in that precision).
            C: (m, m) mutual dissimilarities: the batch is one block (multi-point RR).
            method: overrides the estimator's method for this call.
            k0_rows: exact k0 for None (no rows), "all", or an int s (s evenly
               spaced rows: a deterministic sample).
            errors: "raise" (InputError on the first bad row) or "mask" (bad rows
               get valid=False, a reason and NaN numbers).
        """
        res = self._embed_natural(A, C, method=method, k0_rows=k0_rows, errors=errors)
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
        natural = self.spectrum_.eigenvectors[:, :d] * np.sqrt(self.eigenvalues_)
        self.embedding_ = natural @ R + t
        return self

    def _is_aligned(self) -> bool:
        return not (np.array_equal(self.alignment_rotation_, np.eye(self.alignment_rotation_.shape[0])) and not self.alignment_shift_.any())

    def _to_frame(self, res: EmbeddingResult) -> None:
        if self._is_aligned():
            res.y = res.y @ self.alignment_rotation_ + self.alignment_shift_

    def _embed_natural(self, A: object, C: object = None, *, method: Method | None = None, k0_rows=None, errors: str = "raise") -> EmbeddingResult:
        """``embed`` in the model's own eigenbasis frame (before any alignment)."""
        self._check_fitted()
        method = self.method if method is None else method
        if method not in METHODS:
            raise InputError(f"method must be one of {METHODS}, got {method!r}")
        if errors not in ("raise", "mask"):
            raise InputError(f"errors must be 'raise' or 'mask', got {errors!r}")
        A_arr = validation.check_rows(A, self.n_landmarks_, "A")
        if C is not None:
            return self._embed_block(A_arr, C, k0_rows, errors)
        d = int(self.n_components)
        kernel = self._kernel(d, A_arr.dtype)
        Z, suspect = kernel(A_arr)
        m = A_arr.shape[0]
        valid = np.ones(m, dtype=bool)
        reasons: list[str | None] = [None] * m
        for i in np.flatnonzero(suspect):
            why = validation.describe_bad_row(A_arr[i], "A")
            if why is not None:
                if errors == "raise":
                    raise InputError(f"row {i} of A is invalid: {why}")
                valid[i], reasons[i] = False, why
        with np.errstate(invalid="ignore", over="ignore"):
            return self._finish_embed(A_arr, Z, valid, reasons, method, k0_rows)

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

    def residual_projection(self, A: object) -> tuple[np.ndarray, np.ndarray]:
        """(ŷ_r (m, r), β (m,)): projections on every monitored eigenpair, float64.

        In the model's own eigenbasis (not aligned); k0 = β - ‖ŷ_r‖² (MATH.md §4).
        Input rows must already be valid (finite, non-negative).
        """
        self._check_fitted()
        return self._project_r(validation.check_rows(A, self.n_landmarks_, "A"))

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
    def residuals(self, A: object, C: object = None, k0_rows: None | Literal["all"] | int = "all", n_window: int | None = None) -> tuple[EmbeddingResult, WindowBounds]:
        """Per-object residuals (β, unexplained, exact k0) and the window bounds.

        The window is the batch A (or the block A with C, which makes ‖k0‖₂ and
        the kernel-distance error exact); with ``k0_rows`` an int, Tr(k0) and the
        Nyström spectrum are estimated from that sample (MATH.md §4).
        """
        self._check_fitted()
        A_arr = validation.check_rows(A, self.n_landmarks_, "A")
        res = self.embed(A_arr, method="projection", k0_rows=k0_rows)
        sample = np.flatnonzero(~np.isnan(res.k0))
        y_r, _ = self._project_r(A_arr[sample])
        K0 = None
        if C is not None:
            C64 = validation.check_cross(C, A_arr.shape[0])
            A64 = A_arr.astype(np.float64)
            _, Beta = center_block(np.square(A64), np.square(C64), self.spectrum_.row_means, self.spectrum_.grand_mean)
            y_all, _ = self._project_r(A64)
            K0 = block_k0(Beta, y_all)
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
        """Feature mode: dissimilarities (m, n) of feature rows F (m, p) to the landmarks."""
        self._check_fitted()
        if self.landmark_features_ is None:
            raise InputError("this model was not fitted from features (use fit_features)")
        F64 = validation.as_float_array(F, "features", 2).astype(np.float64)
        p = self.landmark_features_.shape[1]
        if F64.shape[1] != p:
            raise InputError(f"features have {F64.shape[1]} columns, the landmarks have {p} (shape {F64.shape})")
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
