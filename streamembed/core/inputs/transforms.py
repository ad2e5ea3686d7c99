"""Input transforms: what turns a model's raw input into the dissimilarities its spectrum is built on.

A model's landmark spectrum (docs/math.md §1) is built on dissimilarities;
its users may speak in similarities, want geodesic (Isomap) distances, or
need an additive constant that makes the landmarks Euclidean. Each of those
is one small class with the same two sides, in the spirit of openTSNE's
affinity classes (``fit`` on the landmarks, ``to_new`` for arrivals):

- ``fit_landmarks(D)``: (n, n) landmark matrix in -> (n, n) dissimilarities out,
  remembering what arrivals will need (self-similarities, geodesics, the constant);
- ``rows(A)`` / ``block(A, C)``: arrivals' rows (and a block's mutual matrix)
  -> the same transform applied, so they live in the landmarks' space.

``InputPipeline`` chains them in a fixed order: similarities -> dissimilarities
-> geodesic distances -> + additive constant. A plain dissimilarity model has an
empty pipeline, and its rows go straight to the fused kernel (no extra pass).

Units: those of the input dissimilarities (similarities: squared units).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from . import cailliez, geodesic, validation
from . import kernel as kernel_input
from .validation import Problem, ProblemCode

__all__ = ["SimilarityInput", "GeodesicInput", "AdditiveConstant", "InputPipeline", "RowsInCore"]


@dataclass
class RowsInCore:
    """Arrivals' rows after the pipeline.

    Attributes:
        A: (m, n) dissimilarities in the landmarks' space, in the rows' dtype;
            invalid rows are zeros (they are blanked after embedding).
        valid: (m,) bool.
        problems: m entries, None for valid rows.
        known_beta: (m,) bool; False where a similarity row came without its
            self-similarity k(z, z) (the projection is exact, β is unknown).
    """

    A: np.ndarray
    valid: np.ndarray
    problems: list[Problem | None]
    known_beta: np.ndarray


@dataclass
class SimilarityInput:
    """Similarity (kernel) input, converted by d²(x, y) = k(x, x) + k(y, y) − 2k(x, y) (docs/math.md §2).

    Fitted state: ``landmark_self`` (n,) the landmarks' self-similarities k(l, l).
    Arrival rows are (m, n) similarities plus k(z, z), given either as an
    (m, n + 1) row whose last column is k(z, z) or as ``self_similarity`` (m,).
    """

    landmark_self: np.ndarray | None = None

    def fit_landmarks(self, K: np.ndarray) -> np.ndarray:
        K = kernel_input.check_similarity_matrix(K, "K")
        self.landmark_self = np.diagonal(K).copy()
        return kernel_input.landmark_dissimilarities(K)

    @property
    def n_landmarks(self) -> int:
        assert self.landmark_self is not None
        return int(self.landmark_self.shape[0])

    def split(self, A_raw: np.ndarray, kappa: object) -> tuple[np.ndarray, np.ndarray | None]:
        """(similarities (m, n), self-similarities (m,) or None) from (m, n) rows + kappa or (m, n + 1) rows."""
        n, m = self.n_landmarks, A_raw.shape[0]
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
            raise InputError(f"self_similarity must have shape ({m},) to match A's {m} rows, "
                             f"got {np.asarray(kappa).shape}")
        return A_raw, k

    def rows(self, A_raw: np.ndarray, kappa: object) -> RowsInCore:
        K_rows, k = self.split(A_raw, kappa)
        m = K_rows.shape[0]
        valid = np.ones(m, dtype=bool)
        problems: list[Problem | None] = [None] * m
        finite = np.isfinite(K_rows).all(axis=1) & (np.isfinite(k) if k is not None else True)
        for i in np.flatnonzero(~finite).tolist():
            bad = np.flatnonzero(~np.isfinite(K_rows[i]))
            problems[int(i)] = (
                Problem(ProblemCode.NON_FINITE, f"similarity A[{bad[0]}] = {K_rows[i, bad[0]]}", int(bad[0]))
                if bad.size or k is None else Problem(ProblemCode.NON_FINITE, f"self-similarity = {k[i]}"))
            valid[i] = False
        if not finite.all():
            K_rows = np.where(finite[:, None], K_rows, 0).astype(K_rows.dtype)
            k = None if k is None else np.where(finite, k, 0.0)
        assert self.landmark_self is not None
        A, known, neg = kernel_input.row_dissimilarities(K_rows, self.landmark_self, k)
        for i, why in enumerate(neg):
            if why is not None and valid[i]:
                valid[i], problems[i] = False, why
        return RowsInCore(A, valid, problems, known)

    def block(self, A_raw: np.ndarray, C: object) -> tuple[np.ndarray, np.ndarray]:
        """(k, n) and (k, k) dissimilarities of a block given as similarities; raises InputError."""
        m = A_raw.shape[0]
        K_rows, _ = self.split(A_raw, None)
        Cs = validation.as_float_array(C, "C", 2).astype(np.float64)
        if Cs.shape != (m, m):
            raise InputError(f"C must have shape ({m}, {m}) to match A's {m} rows, got {Cs.shape}")
        Cs = kernel_input.check_similarity_matrix(Cs, "C") if m > 1 else Cs
        if not np.isfinite(K_rows).all() or not np.isfinite(Cs).all():
            raise InputError("the block has a non-finite similarity")
        assert self.landmark_self is not None
        A, _, neg = kernel_input.row_dissimilarities(K_rows.astype(np.float64), self.landmark_self,
                                                      np.diagonal(Cs).copy())
        bad = [why for why in neg if why is not None]
        if bad:
            raise InputError(str(bad[0]))
        C64 = kernel_input.block_dissimilarities(Cs) if m > 1 else np.zeros((1, 1))
        return A, C64


@dataclass
class GeodesicInput:
    """Landmark Isomap: shortest paths through the landmarks' k-nearest-neighbour graph (``core.inputs.geodesic``).

    Fitted state: ``geodesics`` (n, n), the landmark geodesic distances.
    """

    k: int
    geodesics: np.ndarray | None = None

    def fit_landmarks(self, D: np.ndarray) -> np.ndarray:
        self.geodesics = geodesic.landmark_geodesics(D, int(self.k))
        return self.geodesics

    def rows(self, A: np.ndarray) -> np.ndarray:
        assert self.geodesics is not None
        return geodesic.object_geodesics(A, self.geodesics, int(self.k))

    def block(self, A: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A block's geodesics, through the landmarks and its own member edges (``geodesic.block_geodesics``)."""
        assert self.geodesics is not None
        return geodesic.block_geodesics(A, C, self.geodesics, int(self.k))


@dataclass
class AdditiveConstant:
    """Cailliez's additive constant c on every dissimilarity between distinct objects (``core.inputs.cailliez``)."""

    constant: float = 0.0

    def fit_landmarks(self, D: np.ndarray) -> np.ndarray:
        self.constant = float(cailliez.additive_constant(D))
        return cailliez.add_constant(D, self.constant) if self.constant > 0 else D

    def rows(self, A: np.ndarray) -> np.ndarray:
        return A + self.constant

    def block(self, A: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return A + self.constant, cailliez.add_constant(C, self.constant)


@dataclass
class InputPipeline:
    """similarities -> dissimilarities -> geodesics -> + constant, each step optional."""

    similarity: SimilarityInput | None = None
    geodesic: GeodesicInput | None = None
    constant: AdditiveConstant | None = None

    @classmethod
    def build(cls, input: str, geodesic_neighbors: int | None, correction: str) -> InputPipeline:
        """An unfitted pipeline for the estimator parameters of the same names."""
        return cls(similarity=SimilarityInput() if input == "similarity" else None,
                   geodesic=GeodesicInput(int(geodesic_neighbors)) if geodesic_neighbors is not None else None,
                   constant=AdditiveConstant() if correction == "cailliez" else None)

    @property
    def identity(self) -> bool:
        """True when arrivals' rows are used as they are (a plain dissimilarity model)."""
        return (self.similarity is None and self.geodesic is None
                and (self.constant is None or self.constant.constant <= 0))

    def fit_landmarks(self, M: object) -> tuple[np.ndarray, np.ndarray | None]:
        """(the dissimilarities the spectrum is built on, the validated raw landmark dissimilarities or None).

        M is the (n, n) landmark matrix the user gave: similarities for a
        similarity model (then the raw dissimilarities are not kept), else
        dissimilarities (not squared).
        """
        if self.similarity is not None:
            D = self.similarity.fit_landmarks(np.asarray(M))
            raw = None
        else:
            D = raw = validation.check_dissimilarity_matrix(M, "D")
        if self.geodesic is not None:
            D = self.geodesic.fit_landmarks(D)
        if self.constant is not None:
            D = self.constant.fit_landmarks(D)
        return D, raw

    def rows(self, A_raw: np.ndarray, n_landmarks: int, kappa: object = None) -> RowsInCore:
        """Arrivals' raw rows -> RowsInCore (validated; invalid rows zeroed)."""
        if self.similarity is not None:
            out = self.similarity.rows(A_raw, kappa)
        else:
            A = validation.check_rows(A_raw, n_landmarks, "A")
            problems = validation.row_problems(A, "A")
            valid = np.array([p is None for p in problems], dtype=bool)
            if not valid.all():
                A = np.where(valid[:, None], A, 0).astype(A.dtype)
            out = RowsInCore(A, valid, problems, np.ones(A.shape[0], dtype=bool))
        dtype = out.A.dtype
        A = out.A
        if self.geodesic is not None:
            A = self.geodesic.rows(A)
        if self.constant is not None and self.constant.constant > 0:
            A = self.constant.rows(A)
        out.A = np.ascontiguousarray(A, dtype=dtype)
        return out

    def block(self, A_raw: np.ndarray, C: object, n_landmarks: int) -> tuple[np.ndarray, np.ndarray]:
        """A block's raw rows and mutual matrix -> ((k, n), (k, k)) float64; raises InputError."""
        m = A_raw.shape[0]
        if self.similarity is not None:
            A, C64 = self.similarity.block(A_raw, C)
        else:
            A = validation.check_rows(A_raw, n_landmarks, "A").astype(np.float64)
            for i, why in enumerate(validation.row_problems(A, "A")):
                if why is not None:
                    raise InputError(f"row {i} of A is invalid: {why}")
            C64 = validation.check_cross(C, m)
        if self.geodesic is not None:
            A, C64 = self.geodesic.block(A, C64)
        if self.constant is not None and self.constant.constant > 0:
            A, C64 = self.constant.block(A, C64)
        return A, C64

    # ------------------------------------------------------------------ persistence
    def state(self) -> dict[str, np.ndarray]:
        """The fitted arrays (for ``model_io``); absent keys mean the step is off."""
        out: dict[str, np.ndarray] = {}
        if self.similarity is not None and self.similarity.landmark_self is not None:
            out["landmark_self_similarity"] = self.similarity.landmark_self
        if self.geodesic is not None and self.geodesic.geodesics is not None:
            out["geodesic_distances"] = self.geodesic.geodesics
        if self.constant is not None and self.constant.constant:
            out["additive_constant"] = np.array(float(self.constant.constant))
        return out

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], n_landmarks: int, *, input: str,
                   geodesic_neighbors: int | None, correction: str) -> InputPipeline:
        """Rebuild a fitted pipeline; raises InputError when the arrays do not match the parameters."""
        n = n_landmarks
        S = arrays.get("landmark_self_similarity")
        G = arrays.get("geodesic_distances")
        c = float(arrays["additive_constant"]) if "additive_constant" in arrays else 0.0
        if S is not None and np.shape(S) != (n,):
            raise InputError(f"landmark_self_similarity must have shape ({n},), got {np.shape(S)}")
        if G is not None and np.shape(G) != (n, n):
            raise InputError(f"geodesic_distances must have shape ({n}, {n}), got {np.shape(G)}")
        if (input == "similarity") != (S is not None):
            raise InputError("input='similarity' models need the landmark self-similarities (and only they have them)")
        if (geodesic_neighbors is not None) != (G is not None):
            raise InputError("geodesic_neighbors models need the landmark geodesic distances (and only they have them)")
        if not np.isfinite(c) or c < 0:
            raise InputError(f"additive_constant must be finite and non-negative, got {c}")
        pipe = cls.build(input, geodesic_neighbors, correction)
        if pipe.similarity is not None:
            pipe.similarity.landmark_self = np.asarray(S, dtype=np.float64)
        if pipe.geodesic is not None:
            pipe.geodesic.geodesics = np.asarray(G, dtype=np.float64)
        if c > 0:
            pipe.constant = pipe.constant or AdditiveConstant()
            pipe.constant.constant = c
        return pipe
