"""Projection of new objects: the hot path (MATH.md §3, with §2 folded in).

Gower's formula, Bengio's Nyström formula, landmark MDS and kernel-PCA
out-of-sample projection are the same map ŷ = Λ^{-1/2} Uᵀ b. With b the
centred cross-similarities of §2 and Uᵀe = 0 kept exact by subtracting the
column sums, everything up to the squaring of the input is linear in a2:

    ŷ = a2 · W + w0,   W = -1/2 (U - e·(eᵀU)/n) Λ^{-1/2},   w0 = 1/2 Λ^{-1/2} Uᵀ(m_Δ - g e)
    β = a2 · e/n - g/2

so one matrix product with the augmented (n, p+1) matrix [W | e/n] gives the
p projected coordinates and β for a whole block of rows. Rows are processed
in cache-sized blocks: the block is squared into a reused buffer (no
per-batch allocation, PERF.md) and multiplied while it is still in cache.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .blas import single_blas_thread
from .cmds import LandmarkSpectrum

#: Rows per cache block ≈ BLOCK_ELEMENTS / n: 128 rows at n = 500 (256 KB of
#: float32, measured best for float32 and float64 here: larger blocks fall out
#: of the 1 MiB per-core L2 with the squared copy, smaller ones pay numpy's
#: per-call overhead on every block).
BLOCK_ELEMENTS = 64_000


class ProjectionKernel:
    """Fused map from raw dissimilarities to (projected coordinates, β, row minimum).

    Args:
        spectrum: the landmark spectrum.
        n_coords: how many leading eigenpairs to project on (d for the map,
            r for residual monitoring).
        dtype: float32 or float64, the precision of the inputs it will see;
            the whole product runs in it (numpy 2 would otherwise promote a
            float32 batch and leave the fast BLAS path, PERF.md).
        n_threads: worker threads; each takes a contiguous share of the rows.
    """

    def __init__(self, spectrum: LandmarkSpectrum, n_coords: int, dtype: np.dtype, n_threads: int | None = None):
        lam = spectrum.eigenvalues[:n_coords]
        U = spectrum.eigenvectors[:, :n_coords]
        n = U.shape[0]
        inv_sqrt = 1.0 / np.sqrt(lam)
        W = np.empty((n, n_coords + 1), dtype=np.float64)
        W[:, :n_coords] = -0.5 * (U - U.sum(axis=0, keepdims=True) / n) * inv_sqrt
        W[:, n_coords] = 1.0 / n
        const = np.empty(n_coords + 1, dtype=np.float64)
        const[:n_coords] = 0.5 * inv_sqrt * (U.T @ (spectrum.row_means - spectrum.grand_mean))
        const[n_coords] = -0.5 * spectrum.grand_mean
        self.dtype = np.dtype(dtype)
        self.n_coords = n_coords
        self.n_landmarks = n
        self.W = np.ascontiguousarray(W, dtype=self.dtype)
        self.const = const.astype(self.dtype)
        self.n_threads = n_threads if n_threads is not None else min(2, os.cpu_count() or 1)
        self.block_rows = int(np.clip(BLOCK_ELEMENTS // n, 16, 1024))
        self._pool: ThreadPoolExecutor | None = None
        self._buffers: dict[int, np.ndarray] = {}

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_pool"] = None
        state["_buffers"] = {}
        return state

    def _buffer(self, worker: int) -> np.ndarray:
        buf = self._buffers.get(worker)
        if buf is None:
            buf = np.empty((self.block_rows, self.n_landmarks), dtype=self.dtype)
            self._buffers[worker] = buf
        return buf

    def _run(self, A: np.ndarray, Z: np.ndarray, blkmin: np.ndarray, start: int, stop: int, worker: int) -> None:
        buf = self._buffer(worker)
        with np.errstate(invalid="ignore", over="ignore"):
            self._run_blocks(A, Z, blkmin, start, stop, buf)

    def _run_blocks(self, A: np.ndarray, Z: np.ndarray, blkmin: np.ndarray, start: int, stop: int, buf: np.ndarray) -> None:
        W = self.W
        bs = self.block_rows
        for s in range(start, stop, bs):
            e = min(s + bs, stop)
            blk = A[s:e]
            sq = buf[: e - s]
            blkmin[s // bs] = blk.min()
            np.multiply(blk, blk, out=sq)
            np.matmul(sq, W, out=Z[s:e])

    def __call__(self, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Apply to raw dissimilarities A (m, n) of this kernel's dtype.

        Returns:
            Z: (m, p+1) in the kernel's dtype; Z[:, :p] projected coordinates,
               Z[:, p] = β.
            suspect: (m,) bool, True for rows that may be invalid: rows of a
               cache block whose minimum is negative or NaN, and rows whose β is
               not finite (an infinite entry). Only these need a closer look
               (``validation.describe_bad_row``); the check costs one scalar
               reduction per cache block instead of a pass over the batch.
        """
        if A.dtype != self.dtype:
            raise TypeError(f"kernel built for {self.dtype}, got {A.dtype}")
        A = np.ascontiguousarray(A)
        m = A.shape[0]
        bs = self.block_rows
        Z = np.empty((m, self.n_coords + 1), dtype=self.dtype)
        blkmin = np.zeros(-(-m // bs), dtype=self.dtype)
        workers = self.n_threads if m >= 4 * bs * self.n_threads else 1
        if workers == 1:
            self._run(A, Z, blkmin, 0, m, 0)
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.n_threads, thread_name_prefix="streamembed-proj")
            # Split on block boundaries so each block's minimum has one writer.
            bounds = [min(m, (m * w // workers) // bs * bs) for w in range(workers)] + [m]
            with single_blas_thread():  # one BLAS thread per Python worker (PERF.md)
                futures = [self._pool.submit(self._run, A, Z, blkmin, bounds[w], bounds[w + 1], w)
                           for w in range(workers)]
                for f in futures:
                    f.result()
        with np.errstate(invalid="ignore", over="ignore"):
            Z += self.const
        suspect = ~np.isfinite(Z[:, self.n_coords])
        bad_blocks = np.flatnonzero(~(blkmin >= 0))
        for b in bad_blocks:
            suspect[b * bs : (b + 1) * bs] = True
        return Z, suspect
