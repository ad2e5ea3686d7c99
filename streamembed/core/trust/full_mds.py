"""Where a full classical MDS puts objects, in the frame of a landmark map (docs/math.md §9.1).

The truth a radius is calibrated against: the classical MDS of every object
of a set that contains the map's landmarks (the fit population, or a sample
of it, or a sample of a window with the landmarks), its top d eigenpairs by
the partial eigensolver (``core.fit.cmds.partial_eigh``), moved by the one
rigid motion (docs/math.md §5: rotation or reflection and translation, no
scaling) that best matches its landmarks to the map's. A member's full-MDS
position is its row of that configuration; an object outside the set is put
where the full MDS would put it by Gower's formula (docs/math.md §3), which
for a member gives back its row. An object's placement error is its distance
from its full-MDS position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..fit.cmds import double_center, partial_eigh
from ..runtime import single_blas_thread
from ..refit.procrustes import orthogonal_procrustes_align

__all__ = ["FullMap", "dissimilarities_from_similarities"]


@dataclass(frozen=True)
class FullMap:
    """The classical MDS of N objects aligned to a landmark map.

    Attributes:
        eigenvectors: (N, d) top eigenvectors of the N objects' doubly centred kernel.
        eigenvalues: (d,) their eigenvalues (non-positive ones are clipped to 0: a null axis).
        row_means: (N,) row means of the squared dissimilarities.
        rotation, shift: (d, d) and (d,): aligned positions are y·R + shift.
    """

    eigenvectors: np.ndarray
    eigenvalues: np.ndarray
    row_means: np.ndarray
    rotation: np.ndarray
    shift: np.ndarray

    @classmethod
    def fit_apart(cls, D: np.ndarray, A_landmarks: np.ndarray, landmark_map: np.ndarray) -> FullMap:
        """The full MDS of N objects *without* the landmarks, D (N, N), aligned so that the landmarks, put on it
        by Gower's formula from their dissimilarities A_landmarks (n, N) to the objects, best match
        ``landmark_map`` (n, d): a truth the landmarks have no part in."""
        X = np.asarray(landmark_map, dtype=np.float64)
        bare = cls._spectrum(D, X.shape[1])
        ident = cls(eigenvectors=bare[0], eigenvalues=bare[1], row_means=bare[2], rotation=np.eye(X.shape[1]),
                    shift=np.zeros(X.shape[1]))
        fit = orthogonal_procrustes_align(ident.place(A_landmarks), X)
        return cls(eigenvectors=bare[0], eigenvalues=bare[1], row_means=bare[2], rotation=fit.R, shift=fit.shift)

    @staticmethod
    def _spectrum(D: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        N = D.shape[0]
        if D.shape != (N, N) or d + 2 > N:
            raise InputError(f"a full MDS needs a square matrix of more than d + 1 = {d + 1} objects, got {D.shape}")
        B, row_means, _ = double_center(np.square(np.asarray(D, dtype=np.float64)), overwrite=True)
        with single_blas_thread():
            w, V = partial_eigh(0.5 * (B + B.T), d, d)
        return V[:, :d], np.maximum(w[:d], 0.0), row_means

    @classmethod
    def fit(cls, D: np.ndarray, landmark_rows: np.ndarray, landmark_map: np.ndarray) -> FullMap:
        """The full MDS of dissimilarities D (N, N) aligned so that its rows ``landmark_rows`` (n,) best match
        ``landmark_map`` (n, d), the landmarks' map coordinates in that order."""
        X = np.asarray(landmark_map, dtype=np.float64)
        N, d = D.shape[0], X.shape[1]
        if D.shape != (N, N) or d + 2 > N:
            raise InputError(f"a full MDS needs a square matrix of more than d + 1 = {d + 1} objects, got {D.shape}")
        B, row_means, _ = double_center(np.square(np.asarray(D, dtype=np.float64)), overwrite=True)
        with single_blas_thread():
            w, V = partial_eigh(0.5 * (B + B.T), d, d)
        w = np.maximum(w[:d], 0.0)
        V = V[:, :d]
        fit = orthogonal_procrustes_align((V * np.sqrt(w))[np.asarray(landmark_rows)], X)
        return cls(eigenvectors=V, eigenvalues=w, row_means=row_means, rotation=fit.R, shift=fit.shift)

    @property
    def positions(self) -> np.ndarray:
        """(N, d) the members' aligned full-MDS positions."""
        return (self.eigenvectors * np.sqrt(self.eigenvalues)) @ self.rotation + self.shift

    def place(self, A: np.ndarray) -> np.ndarray:
        """(m, d) aligned full-MDS positions of objects with dissimilarities A (m, N) to the N members (Gower)."""
        a2 = np.square(np.asarray(A, dtype=np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(self.eigenvalues > 0, -0.5 / np.sqrt(self.eigenvalues), 0.0)
        W = self.eigenvectors * w
        return ((a2 - self.row_means) @ W) @ self.rotation + self.shift


def dissimilarities_from_similarities(K: np.ndarray) -> np.ndarray:
    """Dissimilarities √max(k_ii + k_jj − 2 k_ij, 0) (N, N) of a similarity (kernel) matrix K (N, N)."""
    k = np.diagonal(K)
    return np.sqrt(np.maximum(k[:, None] + k[None, :] - 2.0 * K, 0.0))
